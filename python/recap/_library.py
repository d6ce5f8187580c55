"""The C library: _recap_c (or the file RECAP_C_LIBRARY names) loaded with ctypes, the C API's
functions declared, and the strings recap returns read and freed."""

import ctypes
import os
import re


def _find_library():
    here = os.path.dirname(os.path.abspath(__file__))
    package = os.path.join(here, "__init__.py")
    for name in ("_recap_c.so", "_recap_c.dylib", "_recap_c.dll"):
        candidate = os.path.join(here, name)
        if os.path.exists(candidate):
            return candidate
    named = os.environ.get("RECAP_C_LIBRARY")
    if named:
        return named
    raise ImportError(
        "recap: the shared library _recap_c is not next to %s and RECAP_C_LIBRARY is not set; "
        "build recap with CMake (-DRECAP_BUILD_PYTHON=ON) and put <build>/python on "
        "PYTHONPATH, or install it (docs/python.md)" % package)


# The system libraries _recap_c links (built as the wheel and CMake build it on Debian 12), and
# the Debian package of each.
_SYSTEM_LIBRARIES = {
    "libsqlite3.so.0": "libsqlite3-0",
    "libcurl.so.4": "libcurl4",
    "libpq.so.5": "libpq5",
    "libspdlog.so.1.10": "libspdlog1.10",
    "libfmt.so.9": "libfmt9",
    "libstdc++.so.6": "libstdc++6",
    "libgcc_s.so.1": "libgcc-s1",
}


def _load_failure(path, error):
    """What to tell a host whose _recap_c does not load: which library is missing or what is
    wrong with the file, and what to do."""
    text = str(error)
    said = "recap: its C library %s does not load (%s). " % (path, text)
    missing = re.match(r"^\s*([^:\s]+\.so[^:\s]*): cannot open shared object file", text)
    if missing and os.path.basename(missing.group(1)) != os.path.basename(path):
        name = missing.group(1)
        package = _SYSTEM_LIBRARIES.get(name)
        return said + (
            "It needs the system library %s, which is not installed%s. The library holds "
            "recap itself, not the system libraries recap uses; `ldd %s` lists them and "
            "which are missing." % (
                name, ": install it (Debian or Ubuntu: apt-get install %s)" % package
                if package else "", path))
    if "version `" in text:
        return said + (
            "It was built on a newer system than this one: build the wheel on this machine, "
            "or on one as old (docs/python.md).")
    if "ELF" in text or "too short" in text:
        # The loader names the file it could not read: this one, or a library it needs.
        named = re.match(r"^\s*(/[^:]+): ", text)
        if named and os.path.basename(named.group(1)) != os.path.basename(path):
            return said + (
                "The system library %s is damaged or not for this machine: reinstall its "
                "package (Debian or Ubuntu: dpkg -S %s names it)." % (
                    named.group(1), named.group(1)))
        return said + (
            "The file is damaged or was built for another machine: build the wheel again on "
            "this machine and reinstall it (docs/python.md).")
    return said + ("`ldd %s` shows what it needs; build and install recap again "
                   "(docs/python.md)." % path)


def _check_whole(path):
    """Refuses an ELF file cut short (a copy or an install interrupted): the loader would map
    it all the same, and the process would die of SIGBUS at its first call. Other damage is
    left to the loader, which says what it is."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            size = os.fstat(f.fileno()).st_size
    except OSError:
        return
    if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        return  # not a 64-bit little-endian ELF file
    table = int.from_bytes(head[0x28:0x30], "little")  # e_shoff
    entry = int.from_bytes(head[0x3A:0x3C], "little")  # e_shentsize
    count = int.from_bytes(head[0x3C:0x3E], "little")  # e_shnum
    if table + entry * count > size:
        raise ImportError(
            "recap: its C library %s is cut short (%d bytes; its own header says at least %d): "
            "the file was not copied or installed whole. Install recap again "
            "(docs/python.md)." % (path, size, table + entry * count))


#: The path of the shared library this module calls.
library_path = _find_library()
_check_whole(library_path)
try:
    _lib = ctypes.CDLL(library_path)
except OSError as _error:
    raise ImportError(_load_failure(library_path, _error)) from _error

_vp = ctypes.c_void_p
_out = ctypes.POINTER(ctypes.c_void_p)
_SUMMARIZE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
_FREE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_EVENT_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)


class _Sizes(ctypes.Structure):
    _fields_ = [("instructions_chars", ctypes.c_size_t),
                ("tool_catalog_chars", ctypes.c_size_t),
                ("profile_context_window", ctypes.c_size_t)]


def _declare(name, restype, *argtypes):
    function = getattr(_lib, name)
    function.restype = restype
    function.argtypes = list(argtypes)
    return function


_c_int, _c_char_p, _c_size_t = ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t
_code_name = _declare("recap_code_name", _c_char_p, _c_int)
_version = _declare("recap_version", _c_char_p)
_free = _declare("recap_free", None, _vp)
_last_error_remedies = _declare("recap_last_error_remedies", _vp)
_store_open = _declare("recap_store_open", _c_int, _c_char_p, _out, _out)
_store_free = _declare("recap_store_free", None, _vp)
_provider_new_offline = _declare("recap_provider_new_offline", _c_int, _out, _out)
_provider_new_http = _declare("recap_provider_new_http", _c_int, _c_char_p, _out, _out)
_provider_new_callback = _declare("recap_provider_new_callback", _c_int, _c_char_p, _c_size_t,
                                  _SUMMARIZE_FN, _vp, _FREE_FN, _out, _out)
_reply_text = _declare("recap_reply_text", _c_int, _vp, _c_char_p, _c_int, ctypes.c_uint64,
                       ctypes.c_uint64)
_reply_fail = _declare("recap_reply_fail", _c_int, _vp, _c_int, _c_char_p)
_reply_cancelled = _declare("recap_reply_cancelled", _c_int, _vp)
_provider_free = _declare("recap_provider_free", None, _vp)
_compactor_new = _declare("recap_compactor_new", _c_int, _c_char_p, _vp, _vp, _EVENT_FN, _vp,
                          _out, _out)
_compactor_free = _declare("recap_compactor_free", None, _vp)
_append = _declare("recap_append", _c_int, _vp, _c_char_p, _c_char_p, _c_char_p,
                   ctypes.POINTER(ctypes.c_uint64), _out)
_prepare = _declare("recap_prepare", _c_int, _vp, _c_char_p, _c_char_p,
                    ctypes.POINTER(_Sizes), _out, _out)
_prepare_to = _declare("recap_prepare_to", _c_int, _vp, _c_char_p, _c_char_p,
                       ctypes.POINTER(_Sizes), _vp, _out)
_buffer_new = _declare("recap_buffer_new", _vp)
_buffer_free = _declare("recap_buffer_free", None, _vp)
_buffer_data = _declare("recap_buffer_data", _vp, _vp)  # an address: read in place, not copied
_buffer_size = _declare("recap_buffer_size", _c_size_t, _vp)
_buffer_messages = _declare("recap_buffer_messages", None, _vp, ctypes.POINTER(_c_size_t),
                            ctypes.POINTER(_c_size_t))
_plan = _declare("recap_plan", _c_int, _vp, _c_char_p, ctypes.POINTER(_Sizes), _out, _out)
_compact = _declare("recap_compact", _c_int, _vp, _c_char_p, _c_char_p, ctypes.POINTER(_Sizes),
                    _out, _out)
_recover = _declare("recap_recover", _c_int, _vp, _c_char_p, _c_int, _out, _out)
_report_overflow = _declare("recap_report_overflow", _c_int, _vp, _c_char_p, _c_size_t, _out)
_report_prompt_tokens = _declare("recap_report_prompt_tokens", _c_int, _vp, _c_char_p, _c_size_t,
                                 _out)
_recall = _declare("recap_recall", _c_int, _vp, _c_char_p, _c_char_p, _out, _out)
_recall_tool = _declare("recap_recall_tool", _c_int, _c_char_p, _out, _out)
_answer_recall = _declare("recap_answer_recall", _c_int, _vp, _c_char_p, _c_char_p, _c_char_p,
                          _out, _out)
_uncompact = _declare("recap_uncompact", _c_int, _vp, _c_char_p, _out, _out)


def _taken(pointer):
    """The text of a string recap returned, which is then freed."""
    try:
        return ctypes.string_at(pointer).decode("utf-8", "replace")
    finally:
        _free(pointer)


def _taken_bytes(pointer):
    """The bytes of a string recap returned, which is then freed."""
    try:
        return ctypes.string_at(pointer)
    finally:
        _free(pointer)
