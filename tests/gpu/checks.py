"""The results table every check in tests/gpu/ prints last and writes."""
import sys

rows = []
failed = False


def row(check, measured, expected, ok):
    """One check; ok None: a number for information, no verdict."""
    global failed
    if ok is not None:
        failed |= not ok
    verdict = "info" if ok is None else "ok" if ok else "FAIL"
    rows.append(f"| {check} | {measured} | {expected} | {verdict} |")


def note(check, measured, verdict):
    """A row with its own verdict word (info, blocked: why) that fails nothing."""
    rows.append(f"| {check} | {measured} | - | {verdict} |")


def finish(path, title, intro=""):
    """Writes the table to path, prints it, exits 1 when a check failed."""
    table = ["| check | measured | expected | verdict |", "|---|---|---|---|"] + rows
    text = f"# {title}\n\n" + (intro + "\n\n" if intro else "") + "\n".join(table) + "\n"
    with open(path, "w") as f:
        f.write(text)
    print(text)
    sys.exit(1 if failed else 0)
