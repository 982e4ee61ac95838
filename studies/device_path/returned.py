"""The model folders a time-boxed run brings back, as one uncompressed tar archive cut into parts of at most
16 MiB (what a copy back takes), and read back here by joining the parts and extracting safely.

    OUT/models.tar.part1of4 … part4of4   the archive: pretrained/ and mlm/, each a model folder holding its
                                         newest checkpoint, config.json, vocab.txt, checkpoint, metrics.jsonl

A folder inside is named as a path through the archive, OUT/models.tar/pretrained: what --init-from and
studies.device_path.import_jax take. A model folder has an index file per checkpoint beside its data files, which
would not fit two models into the few files a run may bring back; one archive in parts does.
"""
import io
import pathlib
import re
import shutil
import tarfile
import tempfile

from common.errors import InputError

ARCHIVE = "models.tar"
PART_BYTES = 15 * 2 ** 20


def part_name(index, count):
    return f"{ARCHIVE}.part{index}of{count}"


def write_archive(out, folders, work, part_bytes=PART_BYTES):
    """The model folders ({name in the archive: folder, its files only, no subfolders}) as models.tar parts
    in `out`, built in `work` first; returns the parts' paths."""
    whole = pathlib.Path(work) / ARCHIVE
    with tarfile.open(whole, "w", format=tarfile.PAX_FORMAT) as archive:
        for name, folder in folders.items():
            for path in sorted(pathlib.Path(folder).iterdir()):
                if path.is_file():
                    archive.add(path, arcname=f"{name}/{path.name}")
    size = whole.stat().st_size
    count = max(1, -(-size // part_bytes))
    parts = []
    with open(whole, "rb") as source:
        for index in range(1, count + 1):
            parts.append(pathlib.Path(out) / part_name(index, count))
            parts[-1].write_bytes(source.read(part_bytes))
    whole.unlink()
    return parts


def archive_parts(folder):
    """The models.tar parts in `folder`, in order; [] when there are none; InputError when some are missing."""
    found = {}
    for path in pathlib.Path(folder).glob(f"{ARCHIVE}.part*of*"):
        match = re.fullmatch(re.escape(ARCHIVE) + r"\.part(\d+)of(\d+)", path.name)
        if match:
            found[int(match.group(1))] = (int(match.group(2)), path)
    if not found:
        return []
    count = next(iter(found.values()))[0]
    if sorted(found) != list(range(1, count + 1)) or any(c != count for c, _ in found.values()):
        raise InputError(f"{folder}: {len(found)} of the {count} parts of {ARCHIVE}; copy the missing ones back")
    return [found[index][1] for index in range(1, count + 1)]


def archived_member(path):
    """(the parts, the folder's name in the archive) when `path` is <folder>/models.tar/<name>, else None."""
    path = pathlib.Path(path)
    if path.parent.name != ARCHIVE:
        return None
    parts = archive_parts(path.parent.parent)
    if not parts:
        raise InputError(f"{path}: no {ARCHIVE}.part<k>of<n> in {path.parent.parent}; copy the run's parts back")
    return parts, path.name


class _Joined(io.RawIOBase):
    """The parts read one after another as one stream."""

    def __init__(self, parts):
        self.files = [open(p, "rb") for p in parts]

    def readable(self):
        return True

    def readinto(self, buffer):
        while self.files:
            count = self.files[0].readinto(buffer)
            if count:
                return count
            self.files.pop(0).close()
        return 0

    def close(self):
        for file in self.files:
            file.close()
        super().close()


def extract_member(path, into=None):
    """The model folder at <folder>/models.tar/<name>, extracted from the joined parts into `into` (default a
    new temporary folder): only regular files under <name>/, nothing outside it. Returns the folder."""
    parts, name = archived_member(path)
    into = pathlib.Path(into or tempfile.mkdtemp(prefix="returned-"))
    target = into / name
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    found = 0
    try:
        with _Joined(parts) as stream, tarfile.open(fileobj=io.BufferedReader(stream), mode="r|") as archive:
            for member in archive:
                folder, _, file_name = member.name.partition("/")
                if folder != name:
                    continue
                if not member.isfile() or not file_name or "/" in file_name or file_name in (".", ".."):
                    raise InputError(f"{path}: the archive holds {member.name!r}, not a plain file of a model "
                                     "folder; copy the run's parts back again")
                with archive.extractfile(member) as source, open(target / file_name, "wb") as copy:
                    shutil.copyfileobj(source, copy)
                found += 1
    except (tarfile.TarError, EOFError, OSError) as error:
        raise InputError(f"{path}: the archive's parts cannot be read ({error}); copy them back again") from None
    if not found:
        raise InputError(f"{path}: the archive holds no folder {name}; name one it holds (pretrained, mlm)")
    return target
