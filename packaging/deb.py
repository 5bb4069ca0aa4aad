#!/usr/bin/env python3
"""Assembles the Debian package from [package.metadata.deb] in Cargo.toml, with dpkg-deb.

Usage: packaging/deb.py BINARY OUT_DIR   (prints the .deb's path)

The metadata stays the one description of the package (so `cargo deb --no-build` would
make the same one); this script is what deb.sh runs, so building the package needs only
dpkg's own tools (dpkg-deb, dpkg-shlibdeps) and binutils' strip, not a cargo-deb built
from source, which took CI minutes on every run.
"""
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path


def depends(binary: Path, extra: str) -> str:
    """What the binary links, as dpkg-shlibdeps names it (cargo-deb's `$auto`)."""
    with tempfile.TemporaryDirectory() as tmp:
        # dpkg-shlibdeps reads debian/control for the package's name and nothing else here.
        (Path(tmp) / "debian").mkdir()
        (Path(tmp) / "debian/control").write_text(
            "Source: baton\n\nPackage: baton\nArchitecture: any\n"
        )
        out = subprocess.run(
            ["dpkg-shlibdeps", "-O", "-e", str(binary.resolve())],
            cwd=tmp, check=True, capture_output=True, text=True,
        ).stdout
    auto = ""
    for line in out.splitlines():
        if line.startswith("shlibs:Depends="):
            auto = line.split("=", 1)[1]
    parts = [p.strip() for p in extra.split(",") if p.strip()]
    return ", ".join(auto if p == "$auto" else p for p in parts if p != "$auto" or auto)


def description(short: str, extended: str) -> str:
    lines = [short]
    for para in extended.strip().split("\n\n"):
        text = " ".join(para.split())
        line = ""
        for word in text.split(" "):
            if line and len(line) + 1 + len(word) > 79:
                lines.append(" " + line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        lines.append(" " + line)
    return "\n".join(lines)


def main() -> None:
    binary, out_dir = Path(sys.argv[1]), Path(sys.argv[2])
    manifest = tomllib.loads(Path("Cargo.toml").read_text())
    pkg = manifest["package"]
    deb = pkg["metadata"]["deb"]
    arch = subprocess.run(
        ["dpkg", "--print-architecture"], check=True, capture_output=True, text=True
    ).stdout.strip()
    version = f"{pkg['version']}-1"

    stage = Path(tempfile.mkdtemp(prefix="baton-deb."))
    try:
        # mkdtemp makes it 0700, and the root of the tree is the package's `/`.
        os.chmod(stage, 0o755)
        for src, dest, mode in deb["assets"]:
            if src == "target/release/baton":
                matches = [str(binary)]
            else:
                matches = sorted(glob.glob(src))
                if not matches:
                    sys.exit(f"deb.py: no file matches the asset {src!r}")
            for path in matches:
                target = stage / dest.lstrip("/") / Path(path).name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
                os.chmod(target, int(mode, 8))
        # The release profile keeps line tables (for backtraces); the package does not.
        shipped = stage / "usr/bin/baton"
        subprocess.run(["strip", "--strip-unneeded", str(shipped)], check=True)

        doc = stage / "usr/share/doc" / pkg["name"]
        doc.mkdir(parents=True, exist_ok=True)
        (doc / "copyright").write_text(
            "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
            f"Upstream-Name: {pkg['name']}\n"
            f"Source: {pkg['repository']}\n\n"
            "Files: *\n"
            f"Copyright: {deb['maintainer']}\n"
            f"License: {pkg['license']}\n"
        )
        os.chmod(doc / "copyright", 0o644)

        sums, size = [], 0
        for path in sorted(p for p in stage.rglob("*") if p.is_file()):
            data = path.read_bytes()
            size += len(data)
            sums.append(f"{hashlib.md5(data).hexdigest()}  {path.relative_to(stage)}\n")
        control = stage / "DEBIAN"
        control.mkdir()
        (control / "md5sums").write_text("".join(sums))
        fields = [
            ("Package", pkg["name"]),
            ("Version", version),
            ("Architecture", arch),
            ("Maintainer", deb["maintainer"]),
            ("Installed-Size", str((size + 1023) // 1024)),
            ("Depends", depends(shipped, deb.get("depends", "$auto"))),
            ("Section", deb["section"]),
            ("Priority", deb["priority"]),
            ("Homepage", pkg["repository"]),
            ("Description", description(pkg["description"], deb["extended-description"])),
        ]
        (control / "control").write_text(
            "".join(f"{k}: {v}\n" for k, v in fields if v)
        )
        out_dir.mkdir(parents=True, exist_ok=True)
        out = out_dir / f"{pkg['name']}_{version}_{arch}.deb"
        subprocess.run(
            ["dpkg-deb", "--root-owner-group", "-Zxz", "--build", str(stage), str(out)],
            check=True, stdout=subprocess.DEVNULL,
        )
        print(out)
    finally:
        shutil.rmtree(stage)


if __name__ == "__main__":
    main()
