#!/usr/bin/env bash
# Prints the Debian mirror this machine's apt already uses for SUITE's main component (deb822
# .sources or one-line sources.list), for scripts that fetch from it (kube-node.sh's deb-src and
# base image, arm64.sh's root file system): no host name is written in croft's scripts. Exits 1
# when apt names none.   Usage: scripts/apt-mirror.sh [SUITE]   (default: this machine's codename)
set -euo pipefail
suite=${1:-$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")}
python3 - "$suite" <<'EOF'
import glob, sys
suite = sys.argv[1]
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")) + ["/etc/apt/sources.list"]:
    try:
        text = open(path).read()
    except OSError:
        continue
    if path.endswith(".sources"):
        for stanza in text.split("\n\n"):
            fields = {}
            for line in stanza.splitlines():
                if ":" in line and not line.startswith((" ", "#")):
                    key, value = line.split(":", 1)
                    fields[key.strip().lower()] = value.split()
            if suite in fields.get("suites", []) and "main" in fields.get("components", []):
                print(fields["uris"][0])
                sys.exit(0)
    else:
        for line in text.splitlines():
            words = [w for w in line.split() if not w.startswith("[")]
            if len(words) >= 4 and words[0] == "deb" and words[2] == suite and "main" in words[3:]:
                print(words[1])
                sys.exit(0)
sys.exit(1)
EOF
