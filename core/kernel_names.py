"""Kernel names as a reader wants them in prose and tables: the qualified function name, without
its template arguments, argument list or return type, at most KERNEL_NAME_MAX_CHARS long.

    short_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous "
                      "namespace)::...>(int, ...)")   ->  "at::native::vectorized_elementwise_kernel<...>"
    short_kernel_name("_ZN5aiter24add_rmsnorm_quant_kernelIDF16bLi64EEEvPT0_")
                                                      ->  "aiter::add_rmsnorm_quant_kernel<...>"

Itanium-mangled names (`_Z...`, as ROCm profilers often record them, sometimes cut short) are read
only as far as their qualified name: the template arguments are skipped, never spelled out, so a
truncated symbol still gets its name. Synthetic ops (`launcher->kernel (Synthetic Op)`) keep the
launcher and shorten the kernel. A name that is not a C++ symbol passes unchanged but for the cap.
The full names stay in the warehouse and in the reports' "Kernel names" appendix.
"""

from __future__ import annotations

import re

from tracelake.core.text_format import CLIP, clip

KERNEL_NAME_MAX_CHARS = 80  # a table cell a reader can scan; longer names end in "..." (full name in the appendix)
SYNTHETIC_KERNEL_MIN_CHARS = 40  # a synthetic op's kernel keeps this much of its name beside the launcher
ELIDED = "<...>"
_SYNTHETIC = re.compile(r"^(?P<launcher>[^\s<>()]+?)->(?P<kernel>.+?)(?P<suffix> \(Synthetic Op\))?$")
_OPEN = {"<": ">", "(": ")", "[": "]", "{": "}"}
_CLOSE = {v: k for k, v in _OPEN.items()}
_CV = "rVK"
_BUILTIN_STD = {"t": "std", "a": "std::allocator", "b": "std::basic_string", "s": "std::string",
                "i": "std::istream", "o": "std::ostream", "d": "std::iostream"}
_OPERATOR_NAMES = {"cl": "operator()", "ix": "operator[]", "eq": "operator==", "pl": "operator+",
                   "mi": "operator-", "ml": "operator*", "dv": "operator/", "lt": "operator<", "gt": "operator>"}


class _Unreadable(Exception):
    """The mangled name uses a form this reader does not know (it then stops where it is)."""


class _Mangled:
    """A cursor over an Itanium-mangled symbol that reads its qualified name only."""

    def __init__(self, symbol: str) -> None:
        self.s = symbol
        self.i = 0
        self.prefixes: list[str] = []  # the substitution candidates seen in the name itself

    def peek(self, n: int = 1) -> str:
        return self.s[self.i:self.i + n]

    def take(self, n: int = 1) -> str:
        if self.i + n > len(self.s):
            raise _Unreadable("truncated")
        out = self.s[self.i:self.i + n]
        self.i += n
        return out

    def number(self) -> int:
        start = self.i
        while self.i < len(self.s) and self.s[self.i].isdigit():
            self.i += 1
        if start == self.i:
            raise _Unreadable("number expected")
        return int(self.s[start:self.i])

    def source_name(self) -> str:
        name = self.take(self.number())
        return "(anonymous namespace)" if name.startswith("_GLOBAL__N") else name

    def skip_until(self, char: str) -> None:
        end = self.s.find(char, self.i)
        if end < 0:
            raise _Unreadable(f"no {char!r}")
        self.i = end + 1

    def skip_template_args(self) -> None:
        """From an 'I' to its matching 'E': every nested form that ends in 'E' opens a level;
        lengths, numbers and literal values are stepped over so their letters are not read."""
        self.take()  # I
        closers: list[str] = ["I"]
        while closers:
            c = self.take()
            if c.isdigit():
                self.i -= 1
                self.take(self.number())  # a source name
            elif c in "INXJF":
                closers.append(c)
            elif c == "L":
                self._skip_literal(closers)
            elif c == "E":
                opened = closers.pop()
                if opened == "Ul":  # a lambda's signature ends with 'E', then its number and '_'
                    self.skip_until("_")
            elif c == "S":
                nxt = self.take()
                if nxt not in _BUILTIN_STD:
                    self.i -= 1
                    self.skip_until("_")
            elif c == "T":
                nxt = self.peek()
                if nxt in "ytnpk" and nxt:
                    self.take()
                else:
                    self.skip_until("_")
            elif c == "D":
                self._skip_d(closers)
            elif c == "A":
                self.skip_until("_")
            elif c == "U":
                nxt = self.peek()
                if nxt == "t":
                    self.skip_until("_")
                elif nxt == "l":
                    self.take()
                    closers.append("Ul")
            elif c == "f" and self.peek() == "p":
                self.skip_until("_")
            elif c == "Z":
                closers.append("Z")
            # anything else is a one-letter code (builtin type, qualifier, operator letter)

    def _skip_literal(self, closers: list[str]) -> None:
        if self.peek(2) == "_Z":
            self.take(2)
            closers.append("L")  # an encoding, ended by 'E'
            return
        nxt = self.peek()
        if nxt.isdigit():
            self.take(self.number())  # an enum's name, then its value
        elif nxt == "N":
            self.take()
            while self.peek() != "E":
                if self.peek() == "S":
                    self.take()
                    self.skip_until("_") if self.peek() not in _BUILTIN_STD else self.take()
                else:
                    self.take(self.number())
            self.take()
        elif nxt == "S":
            self.take()
            self.skip_until("_") if self.peek() not in _BUILTIN_STD else self.take()
        elif nxt == "D":
            self.take(2)
        self.skip_until("E")

    def _skip_d(self, closers: list[str]) -> None:
        nxt = self.take()
        if nxt == "F":
            self.number()
            self.take()  # '_', 'b' or 'x'
        elif nxt in "vBU":
            self.skip_until("_")
        elif nxt in "tTy":
            closers.append("D")

    def unqualified(self) -> str:
        c = self.peek()
        if c.isdigit():
            return self.source_name()
        if c == "U" and self.peek(2) == "Ut":
            self.skip_until("_")
            return "{unnamed type}"
        if c == "U" and self.peek(2) == "Ul":
            self.take(2)
            depth = 1
            while depth:
                depth += {"I": 1, "N": 1, "E": -1}.get(self.take(), 0)
            self.skip_until("_")
            return "{lambda}"
        if c in "CD" and self.peek(2)[1:].isdigit():
            self.take(2)
            return self.prefixes[-1].rsplit("::", 1)[-1] if c == "C" and self.prefixes else "~"
        op = self.peek(2)
        if op in _OPERATOR_NAMES:
            self.take(2)
            return _OPERATOR_NAMES[op]
        raise _Unreadable(f"name component {c!r}")

    def substitution(self) -> str:
        self.take()  # S
        if self.peek() in _BUILTIN_STD:
            return _BUILTIN_STD[self.take()]
        start = self.i
        self.skip_until("_")
        seq = self.s[start:self.i - 1]
        index = 0 if not seq else int(seq, 36) + 1
        if index >= len(self.prefixes):
            raise _Unreadable("substitution outside the name")
        return self.prefixes[index]

    def component_with_args(self, parts: list[str]) -> None:
        if self.peek() == "I":
            self.skip_template_args()
            parts[-1] += ELIDED
            self.prefixes.append("::".join(parts))

    def name(self) -> str:
        """The qualified name of the encoding at the cursor (after '_Z')."""
        if self.peek() == "L":
            self.take()
        if self.peek() == "N":
            self.take()
            while self.peek() and self.peek() in _CV + "RO":
                self.take()
            parts: list[str] = []
            try:
                while self.peek() != "E":
                    if not self.peek():
                        raise _Unreadable("truncated")
                    if self.peek() == "S":
                        parts.append(self.substitution())
                    else:
                        parts.append(self.unqualified())
                    self.prefixes.append("::".join(parts))
                    self.component_with_args(parts)
            except _Unreadable:
                if not parts:
                    raise
                if not parts[-1].endswith(ELIDED) and self.s[self.i - 1:self.i] != "E":
                    parts[-1] += ELIDED  # cut short inside template arguments
            return "::".join(parts)
        if self.peek() == "S" and self.peek(2) == "St":
            self.take(2)
            parts = ["std", self.unqualified()]
        elif self.peek() == "Z":
            raise _Unreadable("local name")
        else:
            parts = [self.unqualified()]
        self.prefixes.append("::".join(parts))
        try:
            self.component_with_args(parts)
        except _Unreadable:
            parts[-1] += ELIDED
        return "::".join(parts)


def demangled_name(symbol: str) -> str | None:
    """The qualified name of an Itanium-mangled symbol, template arguments as `<...>`; None when
    `symbol` is not one or cannot be read."""
    if not symbol.startswith("_Z"):
        return None
    reader = _Mangled(symbol)
    reader.i = 2
    try:
        name = reader.name()
    except (_Unreadable, ValueError, IndexError):
        return None
    return name or None


def _groups_elided(name: str) -> str:
    """`name` with each outermost <...> group as `<...>` and everything from the argument list on
    dropped; a (...) that stands as a name component ("(anonymous namespace)") is kept."""
    out: list[str] = []
    stack: list[str] = []
    i = 0
    while i < len(name):
        char = name[i]
        if name.startswith("operator", i) and not stack and (i == 0 or not (name[i - 1].isalnum() or name[i - 1] == "_")):
            match = re.match(r"operator\s*(\(\)|\[\]|->|<<=?|>>=?|[<>!=+\-*/%&|^~]=?|\w+)", name[i:])
            if match:
                out.append(match.group(0))
                i += len(match.group(0))
                continue
        if char in _OPEN:
            previous = "".join(out).rstrip()
            if not stack and char == "(" and previous and not previous.endswith("::") and not previous.endswith(" "):
                break  # the argument list: the name ends here
            if not stack and char == "<":
                out.append(ELIDED)
            elif not stack:
                out.append(char)
            stack.append(char)
        elif char in _CLOSE and stack:
            if stack[-1] == _CLOSE[char]:
                stack.pop()
            if not stack and char != ">":
                out.append(char)
        elif not stack or stack[0] != "<":
            out.append(char)
        i += 1
    return "".join(out).strip()


def _without_return_type(name: str) -> str:
    """The last space-separated part outside brackets: `void ns::kernel<...>` -> `ns::kernel<...>`."""
    depth, cut = 0, 0
    for i, char in enumerate(name):
        if char in "({[":
            depth += 1
        elif char in ")}]":
            depth -= 1
        elif char == " " and depth == 0 and not name.startswith("operator", max(0, i - 8)):
            cut = i + 1
    return name[cut:] or name


def _cap(name: str, limit: int) -> str:
    """At most `limit` characters: leading namespaces go first (`...::kernel<...>`), then the tail."""
    if len(name) <= limit:
        return name
    parts = name.split("::")
    while len(parts) > 1 and len(CLIP + "::" + "::".join(parts)) > limit:
        parts.pop(0)
    if len(parts) < len(name.split("::")):
        name = CLIP + "::" + "::".join(parts)
    return clip(name, limit, strip_end=True)


_SYMBOL_CHARS = re.compile(r"^[\w:~<>,*&!= ()\[\]{}#.-]+$")  # what demangled C++ names are made of
_DEMANGLED = re.compile(r"^[A-Za-z_(~].*(?:[\w>]\(.*\)(?: const)?(?: \[clone [^\]]*\])?|::.*[<(].*)$")
_IDENTIFIER = re.compile(r"^[\w.$-]+$")


def is_cpp_symbol(name: str) -> bool:
    """True when `name` reads as a C++ function symbol: mangled (`_Z...`), or a demangled one made
    of symbol characters that ends with its argument list or has a template or argument list
    after a `::` scope."""
    return name.startswith("_Z") or bool(_SYMBOL_CHARS.match(name) and _DEMANGLED.match(name))


def short_kernel_name(name: str, limit: int = KERNEL_NAME_MAX_CHARS) -> str:
    """`name` (a kernel's, or a synthetic op's `launcher->kernel`) as prose and tables show it."""
    name = " ".join(str(name).split())
    synthetic = _SYNTHETIC.match(name)
    if synthetic and is_cpp_symbol(synthetic.group("kernel")) or synthetic and len(name) > limit:
        launcher, suffix = synthetic.group("launcher"), synthetic.group("suffix") or ""
        if len(launcher) + 2 + len(suffix) + SYNTHETIC_KERNEL_MIN_CHARS > limit:
            suffix = ""  # a long launcher: the kernel keeps its room, the "(Synthetic Op)" mark goes
        room = max(limit - len(launcher) - 2 - len(suffix), SYNTHETIC_KERNEL_MIN_CHARS)
        return _cap(f"{launcher}->{short_kernel_name(synthetic.group('kernel'), room)}{suffix}", limit)
    readable = demangled_name(name)
    if readable is None and is_cpp_symbol(name) and not name.startswith("_Z"):
        readable = _without_return_type(_groups_elided(name))
    if readable is None:  # not a C++ symbol: only its tail goes
        return clip(name, limit, strip_end=True)
    return _cap(readable, limit)


def is_kernel_name(name: str) -> bool:
    """True when `name` reads as a kernel's (or a synthetic op's) name: a C++ symbol, or one long
    identifier with no spaces (Tensile's `Cijk_...`, a cuBLAS `sm90_xmma_...`)."""
    name = str(name)
    return (bool(_SYNTHETIC.match(name)) or is_cpp_symbol(name)
            or (len(name) > KERNEL_NAME_MAX_CHARS and bool(_IDENTIFIER.match(name))))


def shortens(name: str, limit: int = KERNEL_NAME_MAX_CHARS) -> bool:
    """True when `name` is a kernel name whose short form differs from it (the full name then
    belongs in a "Kernel names" appendix)."""
    return is_kernel_name(name) and short_kernel_name(name, limit) != " ".join(str(name).split())
