#!/usr/bin/env python3
"""check_tutorial.py KILN_DIR ROOT — re-run every `$ kiln ...` command shown in
docs/tutorial.md and compare its output (stdout then stderr) with the lines the
page shows under it. `cat ... > /tmp/...` lines of ```sh blocks run first, in
order, as the page's setup; `./host` (needs a built host program) is skipped.
Paths under /tmp/ become a private temporary directory, so parallel runs do not race.
Exit 0 when every output matches; else print each difference and exit 1."""
import os, re, subprocess, sys, tempfile

kiln_dir, root = sys.argv[1], sys.argv[2]
env = dict(os.environ, PATH=kiln_dir + os.pathsep + os.environ.get("PATH", ""))
page = open(os.path.join(root, "docs", "tutorial.md")).read()
tmp = tempfile.TemporaryDirectory()
private = lambda c: c.replace("/tmp/", tmp.name + "/")
bad = ran = 0
for lang, body in re.findall(r"```([a-z]*)\n(.*?)```", page, re.S):
    lines = body.split("\n")[:-1]
    if lang == "sh":
        for ln in lines:
            if ln.startswith("cat "):
                subprocess.run(private(ln), shell=True, cwd=root, env=env, check=True)
        continue
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            i += 1
            continue
        cmd = lines[i][2:]
        while cmd.endswith("\\"):
            i += 1
            cmd = cmd[:-1] + " " + lines[i].strip()
        i += 1
        want = []
        while i < len(lines) and not lines[i].startswith("$ "):
            want.append(lines[i])
            i += 1
        if not cmd.startswith("kiln "):
            continue
        r = subprocess.run(private(cmd), shell=True, cwd=root, env=env, capture_output=True, text=True)
        out = (r.stdout + r.stderr).rstrip("\n")
        got = out.split("\n") if out else []
        ran += 1
        if got != want:
            bad += 1
            print("docs/tutorial.md: the output of `%s` changed; it now prints:" % cmd)
            print("\n".join("  | " + g for g in got[:30]))
print("%d commands, %d with changed output" % (ran, bad))
sys.exit(1 if bad or ran == 0 else 0)
