"""The truth about an ext2 image's blocks, from e2fsprogs: which inode owns each in-use block, what kind
of block it is, and the directory holding the owner. Inference (`blocklab dgraid infer`) is scored
against it; tests and recipes take it from here, never from the engine.

* static blocks (superblock and descriptor copies, reserved descriptors, bitmaps, inode tables) by
  address, from `dumpe2fs`'s group listing: owner 0;
* every other in-use block from `debugfs`'s `stat <ino>` of every inode reachable from the root
  (`ls -p`, walked breadth-first) and of the reserved inodes: `(IND)`, `(DIND)`, `(TIND)` entries are
  indirect blocks, the numbered ranges are directory blocks for a directory and data otherwise (the
  orphan file of ext4's orphan_file feature, which no directory names, too); a
  block of a reserved inode that is static (the resize inode reaches the reserved descriptors) keeps
  its static kind;
* an inode's extended-attribute block (`File ACL: N`): kind `xattr`, owned by that inode (a block
  the kernel shares between inodes with equal attributes: the highest of them);
* parent: the directory an entry was found in (a hard-linked file: the directory with the lowest
  inode number); the root and the reserved inodes have parent 0.

Not covered (the inferrer refuses the feature): extent-mapped inodes (ext4 with extents).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass

KINDS = ("superblock", "descriptors", "reserved-descriptors", "block-bitmap", "inode-bitmap", "inode-table",
         "directory", "indirect", "data", "xattr")


class TruthError(ValueError):
    """An image e2fsprogs cannot read (the CLI reports it in one line, exit status 2)."""


@dataclass(frozen=True)
class BlockTruth:
    owner: int
    kind: str
    parent: int


def _tool(name: str) -> str:
    for d in os.environ.get("PATH", "").split(":") + ["/usr/sbin", "/sbin"]:
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    found = shutil.which(name)
    if found:
        return found
    raise TruthError(f"{name} not found: install e2fsprogs (`make tools`)")


def _run(args: list[str], image: str, stdin: str | None = None) -> str:
    env = dict(os.environ, LC_ALL="C", DEBUGFS_PAGER="__none__", PAGER="__none__")
    r = subprocess.run(args, input=stdin, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        msg = (r.stderr.strip().splitlines() or ["failed"])[-1]
        raise TruthError(f"{image}: {os.path.basename(args[0])}: {msg}")
    return r.stdout


def _span(text: str) -> range:
    a, _, b = text.partition("-")
    return range(int(a), int(b or a) + 1)


def static_blocks(image: str) -> tuple[dict[int, str], dict[str, str]]:
    """Static block -> kind, and dumpe2fs's header fields."""
    out = _run([_tool("dumpe2fs"), image], image)
    header: dict[str, str] = {}
    kinds: dict[int, str] = {}
    pats = [
        (r"(?:Primary|Backup) superblock at (\d+)", "superblock"),
        (r"Group descriptors at (\d+-\d+|\d+)", "descriptors"),
        (r"Reserved GDT blocks at (\d+-\d+|\d+)", "reserved-descriptors"),
        (r"Block bitmap at (\d+)", "block-bitmap"),
        (r"Inode bitmap at (\d+)", "inode-bitmap"),
        (r"Inode table at (\d+-\d+|\d+)", "inode-table"),
    ]
    in_groups = False
    for line in out.splitlines():
        if line.startswith("Group "):
            in_groups = True
        if not in_groups:
            k, sep, v = line.partition(":")
            if sep:
                header[k.strip()] = v.strip()
            continue
        for pat, kind in pats:
            for m in re.finditer(pat, line):
                for b in _span(m.group(1)):
                    kinds[b] = kind
    if not kinds:
        raise TruthError(f"{image}: dumpe2fs listed no groups")
    return kinds, header


def _batches(image: str, commands: list[str]) -> dict[str, str]:
    """Run debugfs commands in one process; each command's output by command."""
    if not commands:
        return {}
    out = _run([_tool("debugfs"), "-f", "-", image], image, stdin="\n".join(commands) + "\n")
    res: dict[str, list[str]] = {}
    cur = None
    for line in out.splitlines():
        if line.startswith("debugfs: "):
            cur = line[len("debugfs: "):].strip()
            res[cur] = []
        elif cur is not None:
            res[cur].append(line)
    return {k: "\n".join(v) for k, v in res.items()}


@dataclass
class Tree:
    """What walking the image from the root finds."""
    parent: dict[int, int]  # every reachable inode -> its parent directory (the root: 0)
    dirs: set[int]
    paths: dict[int, str]  # every reachable directory and regular file -> the first path found (breadth first)


def walk(image: str) -> Tree:
    """Every inode reachable from the root (`ls -p`, breadth first, one debugfs per level)."""
    tree = Tree({2: 0}, {2}, {2: "/"})
    level = [2]
    while level:
        outs = _batches(image, [f"ls -p <{d}>" for d in level])
        nxt = []
        for d in level:
            for line in outs.get(f"ls -p <{d}>", "").splitlines():
                f = line.strip().split("/")
                # /ino/mode/uid/gid/name/size/
                if len(f) < 7 or not f[1].isdigit():
                    continue
                ino, mode, name = int(f[1]), int(f[2], 8), f[5]
                if ino == 0 or name in (".", ".."):
                    continue
                if ino not in tree.parent or d < tree.parent[ino]:
                    tree.parent[ino] = d
                # symlinks, devices: neither files nor directories, no path
                if mode & 0o170000 in (0o040000, 0o100000) and ino not in tree.paths:
                    tree.paths[ino] = os.path.join(tree.paths[d], name)
                if mode & 0o170000 == 0o040000 and ino not in tree.dirs:
                    tree.dirs.add(ino)
                    nxt.append(ino)
        level = sorted(nxt)
    return tree


_ITEM = re.compile(r"\((IND|DIND|TIND|[\d-]+)\):(\d+(?:-\d+)?)")
_ACL = re.compile(r"File ACL: (\d+)")


def extract(image: str, tree: Tree | None = None) -> tuple[dict[int, BlockTruth], dict]:
    """block -> BlockTruth for every in-use block of `image`, and facts about the image (`tree`: the
    image's walk, if the caller has it already)."""
    statics, header = static_blocks(image)
    try:
        block_size = int(header["Block size"])
        first_ino = int(header.get("First inode", "11"))
    except (KeyError, ValueError) as e:
        raise TruthError(f"{image}: dumpe2fs header lacks a field: {e}")
    tree = tree or walk(image)
    parent, dirs = tree.parent, tree.dirs
    # The orphan file (ext4's orphan_file feature) is an inode no directory names.
    orphan = header.get("Orphan file inode", "")
    extra = {int(orphan)} if orphan.isdigit() and orphan != "0" else set()
    inodes = sorted(set(parent) | set(range(1, first_ino)) | extra)
    stats = _batches(image, [f"stat <{i}>" for i in inodes])
    truth: dict[int, BlockTruth] = {b: BlockTruth(0, k, 0) for b, k in statics.items()}
    for ino in inodes:
        text = stats.get(f"stat <{ino}>", "")
        par = parent.get(ino, 0)
        acl = _ACL.search(text)
        if acl and int(acl.group(1)) != 0:
            truth[int(acl.group(1))] = BlockTruth(ino, "xattr", par)
        if "BLOCKS:" not in text or "EXTENTS:" in text:
            continue
        blocks_text = text.split("BLOCKS:", 1)[1].split("TOTAL:", 1)[0]
        leaf = "directory" if ino in dirs else "data"
        for m in _ITEM.finditer(blocks_text):
            kind = "indirect" if m.group(1) in ("IND", "DIND", "TIND") else leaf
            for b in _span(m.group(2)):
                if b in statics:
                    continue
                truth[b] = BlockTruth(ino, kind, par)
    facts = {"block_size": block_size, "blocks": int(header.get("Block count", "0")), "inodes_walked": len(parent),
             "directories": len(dirs)}
    return truth, facts


def inode_of(image: str, path: str) -> int:
    """The inode number of `path` inside the image."""
    out = _run([_tool("debugfs"), "-R", f"stat {path}", image], image)
    m = re.search(r"Inode: (\d+)", out)
    if not m:
        raise TruthError(f"{image}: {path}: not found")
    return int(m.group(1))


def write_csv(truth: dict[int, BlockTruth], path: str) -> None:
    with open(path, "w") as f:
        f.write("block,owner,kind,parent\n")
        for b in sorted(truth):
            t = truth[b]
            f.write(f"{b},{t.owner},{t.kind},{t.parent}\n")
