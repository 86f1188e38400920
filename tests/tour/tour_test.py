#!/usr/bin/env python3
"""tour_test.py DELAYQD APPS_DIR SOURCE_DIR — the README's tour, run in order against one fresh
delayqd, each command's output compared with the one the README shows.

The tour's commands are the `$ ` lines of the console blocks in README.md's "A 60-second tour"
(a line ending in a backslash goes on), run one after another in one bash, as a reader pastes
them. The first block (`make run`) is the server itself: this test starts delayqd instead, on
free loopback ports, and the receiver of docs/webhooks.md's quick start beside it; the addresses
of the README (127.0.0.1:11300, 127.0.0.1:8080, 127.0.0.1:9000, build/release/apps) are replaced
by theirs, and DELAYQ_SERVER points the CLI at the server. An expected line matches the line
printed when they are equal after masking: `...` stands for any text, an ISO time for any ISO
time, and a number of seconds ("2.00s", "1.998s") for any number of seconds. Exits 1 and
shows both outputs on the first command whose output differs. With TOUR_PRINT=1 in the
environment it prints every command and its output instead, for a README being updated."""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def section(text, title):
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return text[start:end if end >= 0 else len(text)]


def blocks(text, kind):
    """The bodies of the fenced blocks of one kind ("console", "python")."""
    return re.findall(r"^```" + kind + r"\n(.*?)^```", text, re.S | re.M)


def commands(block):
    """(command, expected output lines) for each `$ ` line of a console block."""
    out = []
    lines = block.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            raise SystemExit(f"tour: a console line outside any command: {lines[i]!r}")
        command = lines[i][2:]
        while command.endswith("\\"):
            i += 1
            command += "\n" + lines[i]
        i += 1
        expected = []
        while i < len(lines) and not lines[i].startswith("$ "):
            expected.append(lines[i])
            i += 1
        out.append((command, expected))
    return out


ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


def pattern(line):
    out = ""
    for piece in re.split(r"(\.\.\.|" + ISO + r"|\d+\.\d+s\b)", line):
        if piece == "...":
            out += ".*"
        elif re.fullmatch(ISO, piece):
            out += ISO
        elif re.fullmatch(r"\d+\.\d+s", piece):
            out += r"\d+\.\d+s"
        else:
            out += re.escape(piece)
    return re.compile(out + r"\Z")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(path, needle, what):
    for _ in range(200):
        with open(path, errors="replace") as f:
            if needle in f.read():
                return
        time.sleep(0.05)
    with open(path, errors="replace") as f:
        raise SystemExit(f"tour: {what} did not start:\n{f.read()}")


def main():
    delayqd, apps, source = sys.argv[1:4]
    with open(os.path.join(source, "README.md")) as f:
        tour = section(f.read(), "## A 60-second tour")
    with open(os.path.join(source, "docs/webhooks.md")) as f:
        receiver_code = blocks(section(f.read(), "## Quick start"), "python")[0]
    console = blocks(tour, "console")
    if not console or not console[0].startswith("$ make run"):
        raise SystemExit("tour: the first console block is not `make run`")
    steps = [c for block in console[1:] for c in commands(block)]

    work = tempfile.mkdtemp(prefix="delayq-tour-")
    processes = []
    try:
        beanstalk, http, hook = free_port(), free_port(), free_port()
        log = os.path.join(work, "delayqd.out")
        with open(log, "w") as out:
            processes.append(subprocess.Popen(
                [delayqd, "-p", str(beanstalk), "--http", f"127.0.0.1:{http}",
                 "-b", os.path.join(work, "data")], stdout=out, stderr=subprocess.STDOUT))
        wait_for(log, "http listening", "delayqd")
        receiver = os.path.join(work, "receiver.py")
        with open(receiver, "w") as f:
            f.write(receiver_code.replace("9000", str(hook)))
        received = os.path.join(work, "receiver.out")
        with open(received, "w") as out:
            processes.append(subprocess.Popen([sys.executable, receiver], stdout=out,
                                              stderr=subprocess.STDOUT))
        for _ in range(200):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", hook)) == 0:
                    break
            time.sleep(0.05)

        addresses = [("127.0.0.1:11300", f"127.0.0.1:{beanstalk}"),
                     ("127.0.0.1:8080", f"127.0.0.1:{http}"),
                     ("127.0.0.1:9000", f"127.0.0.1:{hook}"),
                     ("$PWD/build/release/apps", apps)]

        def swap(text, pairs):
            for old, new in pairs:
                text = text.replace(old, new)
            return text

        script = "set +e\n"
        for n, (command, _) in enumerate(steps):
            script += f"printf '\\n@@tour {n}\\n'\n{swap(command, addresses)}\n"
        script += "printf '\\n@@tour end\\n'\n"
        env = dict(os.environ, DELAYQ_SERVER=f"http://127.0.0.1:{http}")
        env.pop("DELAYQ_TEST_REDIS_SEEDS_FILE", None)
        ran = subprocess.run(["bash", "-c", script], cwd=source, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=120)
        printed = re.split(r"\n@@tour (?:\d+|end)\n", "\n" + swap(ran.stdout, [(here, readme) for readme, here in addresses]))
        outputs = printed[1:len(steps) + 1]
        for (command, expected), got in zip(steps, outputs):
            got_lines = got.rstrip("\n").split("\n") if got.strip("\n") else []
            if os.environ.get("TOUR_PRINT"):
                print("$ " + command + "\n" + "\n".join(got_lines))
                continue
            ok = len(got_lines) == len(expected) and all(
                pattern(e).match(g) for e, g in zip(expected, got_lines))
            if not ok:
                print(f"tour: `{command}` printed\n" + "\n".join(got_lines) +
                      "\nwhere the README shows\n" + "\n".join(expected))
                return 1
        print(f"tour: {len(steps)} commands, each printed what the README shows")
        return 0
    finally:
        for p in processes:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
