"""What tokenizer/gen_ucd_categories.py and tokenizer/gen_ucd_scripts.py share: the Unicode version the reference
tokenizers use, the UCD package of that version they read it from, and the way they write a C table.

Not run by itself; each generator's own header says how to run it.
"""
import importlib
import sys

UNICODE_VERSION = "16.0.0"


def ucd_package(name, package_version):
    """The UCD package `name` (unicodedata2, unicodedataplus), once it is known to hold UNICODE_VERSION: a generator
    run with another version would write other tables, so it stops saying which release to install."""
    mod = importlib.import_module(name)
    if mod.unidata_version != UNICODE_VERSION:
        sys.exit(f"{name} has Unicode {mod.unidata_version}, want {UNICODE_VERSION} "
                 f"(pip install {name}=={package_version})")
    return mod


def write_prologue(out, comment, include):
    """The generated file's opening comment (its lines, the first after '/* ') and its #include."""
    out.write("/* " + "\n * ".join(comment) + " */\n")
    out.write(f"#include \"{include}\"\n\n")


def write_rows(out, items, per_line, fmt=str, sep=", ", indent="    "):
    """items as C initializers, per_line a line, each line ending in ','."""
    for i in range(0, len(items), per_line):
        out.write(indent + sep.join(fmt(x) for x in items[i:i + per_line]) + ",\n")


def write_array(out, decl, items, per_line, fmt=str):
    """`decl = { ... };` and a blank line, items per_line a line."""
    out.write(decl + " = {\n")
    write_rows(out, items, per_line, fmt)
    out.write("};\n\n")
