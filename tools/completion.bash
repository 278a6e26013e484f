# The functions of cuprobe's bash completion. cuprobe-completion (completion.c)
# writes before them what they read, made from the command and option tables:
# _cuprobe_commands, _cuprobe_command NAME (what a command takes) and
# _cuprobe_value OPTION TEXT (the values of an option, or of an operand).
# They need bash alone; where bash-completion is loaded, its _command_offset
# completes the COMMAND after "--" with that command's own completion.

# Whether the list $1 (words separated by spaces) holds the word $2.
_cuprobe_has()
{
	[[ " $1 " == *" $2 "* ]]
}

# The pids of the processes that map a CUDA driver: a file named libcuda.so or
# libcuda.so.SUFFIX, as the library tells one (cp_path__is_library). Processes
# whose maps this user cannot read are passed over quietly.
_cuprobe_cuda_pids()
{
	local maps pids=()
	while IFS= read -r maps; do
		maps=${maps#/proc/}
		pids+=("${maps%/maps}")
	done < <(command grep -lsE '/libcuda\.so(\.[^/ ]*)?$' /proc/[0-9]*/maps)
	mapfile -t COMPREPLY < <(compgen -W "${pids[*]}" -- "$1")
}

# Files for the text $1: those whose name matches the pattern $2, or every file
# where none does, and the directories, to go into.
_cuprobe_files()
{
	local file
	local -a named=() others=() dirs=()
	compopt -o filenames 2>/dev/null
	while IFS= read -r file; do
		# shellcheck disable=SC2053 # $2 is a pattern
		if [[ -d $file ]]; then
			dirs+=("$file")
		elif [[ ${file##*/} == $2 ]]; then
			named+=("$file")
		else
			others+=("$file")
		fi
	done < <(compgen -f -- "$1")
	((${#named[@]})) || named=("${others[@]}")
	COMPREPLY=("${named[@]}" "${dirs[@]}")
}

# The words up to the cursor as getopt will see them, in words and cword: bash
# splits "--lib=PATH" and "ADDR:PORT" at "=" and ":" (COMP_WORDBREAKS), and the
# pieces are joined again where no blank separates them. at[N]: the index in
# COMP_WORDS where word N starts.
_cuprobe_words()
{
	local line=${COMP_LINE:0:COMP_POINT} blanks word i n=-1
	words=() at=()
	for ((i = 0; i <= COMP_CWORD; i++)); do
		blanks=${line%%[![:blank:]]*}
		line=${line:${#blanks}}
		# The word at the cursor ends there.
		if ((i == COMP_CWORD)); then
			word=$line
		else
			word=${COMP_WORDS[i]}
		fi
		line=${line#"$word"}
		if ((n >= 0)) && [[ -z $blanks && ($word == [=:]* || ${words[n]} == *[=:]) ]]; then
			words[n]+=$word
		else
			words[++n]=$word
			at[n]=$i
		fi
	done
	cword=$n
}

# Readline replaces only what follows the last "=" or ":" of a word (when they
# break words): the replies for the text $1 lose what comes before.
_cuprobe_trim()
{
	local breaks=${COMP_WORDBREAKS//[^=:]/} prefix i
	[[ -n $breaks ]] || return 0
	prefix=${1%"${1##*["$breaks"]}"}
	[[ -n $prefix ]] || return 0
	for i in "${!COMPREPLY[@]}"; do
		COMPREPLY[i]=${COMPREPLY[i]#"$prefix"}
	done
}

# The values of $1 (an option or an operand) for the text $2 into COMPREPLY. $3:
# the word bash itself completes, unquoted: the text, unless it holds "=" or ":".
_cuprobe_values()
{
	if [[ $2 == *[=:]* ]]; then
		_cuprobe_value "$1" "$2"
		_cuprobe_trim "$2"
	else
		_cuprobe_value "$1" "$3"
	fi
}

_cuprobe()
{
	local words at cword cur value_of='' i j w
	local options valued operand takes_command dashdash='' operand_given=''
	COMPREPLY=()
	_cuprobe_words
	cur=${words[cword]}

	# cuprobe's own options (tools/cuprobe.c), or a command, or help COMMAND.
	if ((cword == 1)); then
		if [[ $cur == -* ]]; then
			mapfile -t COMPREPLY < <(compgen -W '-h --help --version' -- "$cur")
		else
			mapfile -t COMPREPLY < <(compgen -W "help $_cuprobe_commands" -- "$cur")
		fi
		return
	fi
	if [[ ${words[1]} == help ]]; then
		((cword == 2)) && mapfile -t COMPREPLY < <(compgen -W "$_cuprobe_commands" -- "$cur")
		return
	fi
	_cuprobe_command "${words[1]}" || return

	# What is given before the cursor: option values, the operand, "--".
	for ((i = 2; i < cword; i++)); do
		w=${words[i]}
		case $w in
		--)
			dashdash=$i
			break
			;;
		--*=*) ;;
		--*)
			if _cuprobe_has "$valued" "$w"; then
				((++i == cword)) && value_of=$w
			fi
			;;
		-?*)
			# Short options, several in one word: a value is the rest of the word, or the next one.
			for ((j = 1; j < ${#w}; j++)); do
				if _cuprobe_has "$valued" "-${w:j:1}"; then
					((j == ${#w} - 1 && ++i == cword)) && value_of=-${w:j:1}
					break
				fi
			done
			;;
		*)
			operand_given=1
			;;
		esac
	done

	# After "--": the COMMAND and its arguments.
	if [[ -n $dashdash ]]; then
		[[ -n $takes_command ]] || return
		if declare -F _command_offset >/dev/null; then
			_command_offset "${at[dashdash + 1]}"
		elif ((cword == dashdash + 1)); then
			mapfile -t COMPREPLY < <(compgen -c -- "$cur")
		else
			_cuprobe_files "${2-$cur}" '*'
		fi
		return
	fi
	if [[ -z $value_of && $cur == --*=* ]]; then
		value_of=${cur%%=*}
		cur=${cur#*=}
		_cuprobe_has "$valued" "$value_of" || return
	fi
	if [[ -n $value_of ]]; then
		_cuprobe_values "$value_of" "$cur" "${2-$cur}"
	elif [[ $cur == -* ]]; then
		mapfile -t COMPREPLY < <(compgen -W "$options${takes_command:+ --}" -- "$cur")
	elif [[ -n $operand && -z $operand_given ]]; then
		_cuprobe_values "$operand" "$cur" "${2-$cur}"
	else
		mapfile -t COMPREPLY < <(compgen -W "$options${takes_command:+ --}" -X '!--*' -- "$cur")
	fi
}

complete -F _cuprobe cuprobe
