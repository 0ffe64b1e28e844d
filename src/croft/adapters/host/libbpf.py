"""The libbpf calls croft makes, typed, over the system's libbpf.so.1 through ctypes (Debian's `libbpf1`,
1.1 or later): opening, loading and attaching a CO-RE object, and the map syscalls by file
descriptor, which serve BCC's maps too.

No maintained Python binding of libbpf exists to use instead (pylibbpf is a pybind11 module marked
not ready for production that pulls in llvmlite; bpfmaps covers maps only and bundles a 2022
libbpf; BCC's own binding needs BCC). The binding is small on purpose: every function croft calls
is declared below with its C signature, and errors follow libbpf 1.0's convention (NULL or a
negative errno, with errno set), raised as `OSError`.

Loading this module opens nothing: `Libbpf.open()` does.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from typing import Final, NewType

LIBRARY: Final = "libbpf.so.1"

# enum libbpf_print_level (libbpf.h)
LIBBPF_WARN, LIBBPF_INFO, LIBBPF_DEBUG = 0, 1, 2
# The flags of bpf_map_update_elem (uapi linux/bpf.h)
BPF_ANY, BPF_NOEXIST = 0, 1

ObjectPtr = NewType("ObjectPtr", int)
ProgramPtr = NewType("ProgramPtr", int)
MapPtr = NewType("MapPtr", int)
LinkPtr = NewType("LinkPtr", int)

# int (*libbpf_print_fn_t)(enum libbpf_print_level level, const char *fmt, va_list ap). va_list is
# passed as a pointer on x86-64 (an array type) and on arm64 (a composite over 16 bytes, passed by
# reference), which vasprintf takes back as it came.
PRINT_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


class LibbpfMissing(OSError):
    """libbpf.so.1 is not installed, or is older than the calls croft makes."""


class Libbpf:
    """The library and its functions' signatures. One per process (`Libbpf.open()` caches it)."""

    _opened: Libbpf | None = None

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._lib = lib
        c_int, c_uint32, c_size_t = ctypes.c_int, ctypes.c_uint32, ctypes.c_size_t
        ptr, c_char_p, c_bool = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_bool
        signatures: dict[str, tuple[object, list[object]]] = {
            "libbpf_set_print": (ptr, [ptr]),
            "libbpf_num_possible_cpus": (c_int, []),
            "bpf_object__open_file": (ptr, [c_char_p, ptr]),
            "bpf_object__load": (c_int, [ptr]),
            "bpf_object__close": (None, [ptr]),
            "bpf_object__next_program": (ptr, [ptr, ptr]),
            "bpf_object__find_program_by_name": (ptr, [ptr, c_char_p]),
            "bpf_object__find_map_by_name": (ptr, [ptr, c_char_p]),
            "bpf_program__name": (c_char_p, [ptr]),
            "bpf_program__set_autoload": (c_int, [ptr, c_bool]),
            "bpf_program__attach": (ptr, [ptr]),
            "bpf_link__destroy": (c_int, [ptr]),
            "bpf_map__fd": (c_int, [ptr]),
            "bpf_map__max_entries": (c_uint32, [ptr]),
            "bpf_map__set_max_entries": (c_int, [ptr, c_uint32]),
            "bpf_map__key_size": (c_uint32, [ptr]),
            "bpf_map__value_size": (c_uint32, [ptr]),
            "bpf_map__set_initial_value": (c_int, [ptr, ptr, c_size_t]),
            "bpf_map_lookup_elem": (c_int, [c_int, ptr, ptr]),
            "bpf_map_update_elem": (c_int, [c_int, ptr, ptr, ctypes.c_uint64]),
            "bpf_map_delete_elem": (c_int, [c_int, ptr]),
            "bpf_map_get_next_key": (c_int, [c_int, ptr, ptr]),
            "bpf_map_lookup_and_delete_batch": (c_int, [c_int, ptr, ptr, ptr, ptr, ptr, ptr]),
        }
        for name, (restype, argtypes) in signatures.items():
            try:
                function = getattr(lib, name)
            except AttributeError as exc:
                raise LibbpfMissing(0, f"{LIBRARY} has no {name}: libbpf 1.1 or later is needed") from exc
            function.restype = restype
            function.argtypes = argtypes

    @classmethod
    def open(cls) -> Libbpf:
        """The system's libbpf.so.1 (`LibbpfMissing` when it is not there)."""
        if cls._opened is None:
            try:
                lib = ctypes.CDLL(LIBRARY, use_errno=True)
            except OSError as exc:
                raise LibbpfMissing(0, f"cannot load {LIBRARY} ({exc}): install libbpf1") from exc
            cls._opened = cls(lib)
        return cls._opened

    # ------------------------------------------------------------------ the library

    def set_print(self, callback: Callable[[int, str], None] | None) -> object:
        """Route libbpf's messages to `callback(level, text)` (None: libbpf's default, stderr).
        Returns the C callback, which must stay referenced while it is set."""
        if callback is None:
            self._lib.libbpf_set_print(None)
            return None
        libc = _libc()

        def printed(level: int, fmt: bytes | None, args: int | None) -> int:
            # vasprintf formats the whole message (a verifier log runs to megabytes) in one pass:
            # `args` can be read once, ctypes has no va_copy.
            text = ctypes.c_char_p()
            if libc.vasprintf(ctypes.byref(text), fmt, ctypes.c_void_p(args)) < 0:
                return 0
            try:
                callback(int(level), (text.value or b"").decode(errors="replace"))
            finally:
                libc.free(text)
            return 0

        c_callback = PRINT_FN(printed)
        self._lib.libbpf_set_print(ctypes.cast(c_callback, ctypes.c_void_p))
        return c_callback

    def num_possible_cpus(self) -> int:
        return _checked_int(int(self._lib.libbpf_num_possible_cpus()), "libbpf_num_possible_cpus")

    # ------------------------------------------------------------------ objects and programs

    def object_open_file(self, path: str) -> ObjectPtr:
        return ObjectPtr(_pointer(self._lib.bpf_object__open_file(os.fsencode(path), None), "open", path))

    def object_load(self, obj: ObjectPtr) -> None:
        _checked_int(int(self._lib.bpf_object__load(obj)), "load")

    def object_close(self, obj: ObjectPtr) -> None:
        self._lib.bpf_object__close(obj)

    def programs(self, obj: ObjectPtr) -> list[ProgramPtr]:
        found: list[ProgramPtr] = []
        program = self._lib.bpf_object__next_program(obj, None)
        while program:
            found.append(ProgramPtr(program))
            program = self._lib.bpf_object__next_program(obj, program)
        return found

    def program_name(self, program: ProgramPtr) -> str:
        name: bytes = self._lib.bpf_program__name(program)
        return name.decode()

    def program_set_autoload(self, program: ProgramPtr, autoload: bool) -> None:
        _checked_int(int(self._lib.bpf_program__set_autoload(program, autoload)), "set_autoload")

    def program_attach(self, program: ProgramPtr) -> LinkPtr:
        link = self._lib.bpf_program__attach(program)
        return LinkPtr(_pointer(link, "attach", self.program_name(program)))

    def link_destroy(self, link: LinkPtr) -> None:
        self._lib.bpf_link__destroy(link)

    def find_map(self, obj: ObjectPtr, name: str) -> MapPtr:
        return MapPtr(_pointer(self._lib.bpf_object__find_map_by_name(obj, name.encode()), "find map", name))

    def map_fd(self, map_: MapPtr) -> int:
        return _checked_int(int(self._lib.bpf_map__fd(map_)), "bpf_map__fd")

    def map_max_entries(self, map_: MapPtr) -> int:
        return int(self._lib.bpf_map__max_entries(map_))

    def map_set_max_entries(self, map_: MapPtr, entries: int) -> None:
        _checked_int(int(self._lib.bpf_map__set_max_entries(map_, entries)), "set_max_entries")

    def map_key_size(self, map_: MapPtr) -> int:
        return int(self._lib.bpf_map__key_size(map_))

    def map_value_size(self, map_: MapPtr) -> int:
        return int(self._lib.bpf_map__value_size(map_))

    def map_set_initial_value(self, map_: MapPtr, data: bytes) -> None:
        buffer = ctypes.create_string_buffer(data, len(data))
        _checked_int(int(self._lib.bpf_map__set_initial_value(map_, buffer, len(data))), "set_initial_value")

    # ------------------------------------------------------------------ maps, by file descriptor

    def lookup(self, fd: int, key: ctypes.Array[ctypes.c_char], value: ctypes.Array[ctypes.c_char]) -> bool:
        """Whether `key` is in the map (its value then in `value`)."""
        return _found(int(self._lib.bpf_map_lookup_elem(fd, key, value)), "BPF_MAP_LOOKUP_ELEM")

    def update(
        self,
        fd: int,
        key: ctypes.Array[ctypes.c_char],
        value: ctypes.Array[ctypes.c_char],
        flags: int = BPF_ANY,
    ) -> None:
        _checked_int(int(self._lib.bpf_map_update_elem(fd, key, value, flags)), "BPF_MAP_UPDATE_ELEM")

    def delete(self, fd: int, key: ctypes.Array[ctypes.c_char]) -> bool:
        """Whether `key` was there to delete."""
        return _found(int(self._lib.bpf_map_delete_elem(fd, key)), "BPF_MAP_DELETE_ELEM")

    def next_key(
        self, fd: int, key: ctypes.Array[ctypes.c_char] | None, next_key: ctypes.Array[ctypes.c_char]
    ) -> bool:
        """The key after `key` (None: the first) in `next_key`; False past the last."""
        return _found(int(self._lib.bpf_map_get_next_key(fd, key, next_key)), "BPF_MAP_GET_NEXT_KEY")

    def lookup_and_delete_batch(
        self,
        fd: int,
        in_batch: ctypes.c_uint32 | None,
        out_batch: ctypes.c_uint32,
        keys: ctypes.Array[ctypes.c_char],
        values: ctypes.Array[ctypes.c_char],
        offset: tuple[int, int],
        count: ctypes.c_uint32,
    ) -> int:
        """One BPF_MAP_LOOKUP_AND_DELETE_BATCH call writing at byte `offset` (keys, values) of the
        buffers: 0, or the errno it failed with (`count` holds how many it returned either way)."""
        result = self._lib.bpf_map_lookup_and_delete_batch(
            fd,
            ctypes.byref(in_batch) if in_batch is not None else None,
            ctypes.byref(out_batch),
            ctypes.byref(keys, offset[0]),
            ctypes.byref(values, offset[1]),
            ctypes.byref(count),
            None,
        )
        return 0 if result == 0 else (ctypes.get_errno() or -int(result))


def _pointer(value: int | None, what: str, name: str) -> int:
    if not value:
        code = ctypes.get_errno()
        raise OSError(code, f"{what} {name}: {os.strerror(code) if code else 'failed'}")
    return value


def _checked_int(result: int, what: str) -> int:
    if result < 0:
        raise OSError(-result, f"{what}: {os.strerror(-result)}")
    return result


def _found(result: int, what: str) -> bool:
    if result == 0:
        return True
    code = ctypes.get_errno() or -result
    if code == 2:  # ENOENT
        return False
    raise OSError(code, f"{what}: {os.strerror(code)}")


_LIBC: ctypes.CDLL | None = None


def _libc() -> ctypes.CDLL:
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None)  # the C library the process already has
        _LIBC.vasprintf.restype = ctypes.c_int
        _LIBC.vasprintf.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_char_p, ctypes.c_void_p]
        _LIBC.free.restype = None
        _LIBC.free.argtypes = [ctypes.c_char_p]
    return _LIBC
