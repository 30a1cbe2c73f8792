#!/usr/bin/env python3
"""Check Terraform directories against a provider schema extract.

Shared by the Azure and the Google Cloud checks. The extracts in <schema dir>/<provider>-<version>.json
(tests/terraform/azure/schema/ by scripts/azurerm-schema, tests/terraform/gcp/schema/ by
tests/terraform/gcp/make-schema) are made by extract_schema.py from the prebuilt CDK provider
packages, which are generated from the provider's own schema. For every `resource` and `data` block of the provider in
every .tf file of each directory (parsed with python-hcl2), this fails on what `terraform validate`
with that provider version would refuse:

  - a type the provider does not have;
  - an argument or nested block it does not have (in `dynamic` blocks too), a computed-only
    attribute set as an argument, an attribute written as a block or a block as an attribute;
  - a required argument or block that is missing (a `dynamic` block counts as present);
  - a reference `TYPE.NAME[...].attr[...].sub` (and `data.`, and `self.` in conditions) to an
    attribute or nested block that does not exist;
  - the provider block's own arguments (`provider "azurerm" { ... }`, `provider "google" { ... }`).

usage:
  check_provider_schema.py --provider azurerm --version 4.78.0 [--schema-dir DIR] TF_DIR...
  check_provider_schema.py --provider azurerm --ends [--schema-dir DIR] TF_DIR...
      print the versions of the extracts at the lower and the upper end of the version constraint
      the directories declare (they must all declare the same one)
  check_provider_schema.py --provider google --inside --schema-dir DIR TF_DIR...
      print the versions of every extract inside that constraint, oldest first
Prints PASS/FAIL lines; exits 1 on any FAIL.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import hcl2

META = {"count", "for_each", "depends_on", "provider", "lifecycle", "provisioner", "connection", "dynamic"}
IDX = r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]"
SEG = rf"(?:\.[a-z_][a-z0-9_]*|{IDX}|\.\*)"


def unquote(s):
    return s[1:-1] if isinstance(s, str) and len(s) >= 2 and s[0] == s[-1] == '"' else s


def is_block(v) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) and x.get("__is_block__") for x in v)


def strings(v):
    """Every string in a parsed value (expressions come as "${...}")."""
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for k, x in v.items():
            if k not in ("__is_block__", "__comments__"):
                yield from strings(k)
                yield from strings(x)
    elif isinstance(v, list):
        for x in v:
            yield from strings(x)


def version_tuple(v: str) -> tuple[int, ...]:
    parts = [int(p) for p in v.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def satisfies(version: str, constraint: str) -> bool:
    v = version_tuple(version)
    for term in [t.strip() for t in constraint.split(",") if t.strip()]:
        m = re.fullmatch(r"(>=|<=|!=|~>|>|<|=)?\s*([0-9.]+)", term)
        if not m:
            raise ValueError(f"cannot read version constraint term {term!r}")
        op, want = m.group(1) or "=", m.group(2)
        w = version_tuple(want)
        if op == "~>":
            n = len(want.split("."))
            upper = list(w[: n - 1])
            upper[-1] += 1
            ok = v >= w and v < tuple(upper + [0] * (3 - len(upper)))
        else:
            ok = {">=": v >= w, ">": v > w, "<=": v <= w, "<": v < w, "=": v == w, "!=": v != w}[op]
        if not ok:
            return False
    return True


class Checker:
    def __init__(self, schema: dict):
        self.schema = schema
        self.provider = schema["provider"]
        self.label = f"{self.provider} {schema['version']}"
        self.errors: list[str] = []

    def err(self, where: str, msg: str) -> None:
        self.errors.append(f"{where}: {msg} ({self.label})")

    def body(self, where: str, body: dict, node: dict, top: bool) -> None:
        attrs, blocks = node.get("attributes", {}), node.get("blocks", {})
        present = set()
        for key, val in body.items():
            key = unquote(key)
            if key in ("__is_block__", "__comments__"):
                continue
            if top and key in META:
                if key == "dynamic":
                    for dyn in val:
                        for name, spec in dyn.items():
                            name = unquote(name)
                            if name == "__is_block__":
                                continue
                            if name not in blocks:
                                self.err(where, f"dynamic block `{name}` is not a block of this type")
                                continue
                            present.add(name)
                            for content in spec.get("content", []):
                                self.body(f"{where}.{name}", content, blocks[name], True)
                continue
            if not top and key == "dynamic":
                for dyn in val:
                    for name, spec in dyn.items():
                        name = unquote(name)
                        if name == "__is_block__":
                            continue
                        if name not in blocks:
                            self.err(where, f"dynamic block `{name}` is not a block here")
                            continue
                        present.add(name)
                        for content in spec.get("content", []):
                            self.body(f"{where}.{name}", content, blocks[name], False)
                continue
            if key in blocks and is_block(val):
                present.add(key)
                spec = blocks[key]
                if spec["nesting"] == "single" and len(val) > 1:
                    self.err(where, f"block `{key}` takes at most one")
                for item in val:
                    self.body(f"{where}.{key}", item, spec, False)
            elif key in blocks:
                self.err(where, f"`{key}` is a block, written as an argument")
            elif key in attrs:
                present.add(key)
                if is_block(val):
                    self.err(where, f"`{key}` is an argument, written as a block")
                elif attrs[key].get("computed"):
                    self.err(where, f"`{key}` is computed only; it cannot be set")
            else:
                self.err(where, f"unknown argument or block `{key}`")
        for name, spec in attrs.items():
            if spec.get("required") and name not in present:
                self.err(where, f"required argument `{name}` is missing")
        for name, spec in blocks.items():
            if spec.get("required") and name not in present:
                self.err(where, f"required block `{name}` is missing")

    def path(self, where: str, ref: str, node: dict, segs: list[str]) -> None:
        """Walk `.name` and `[i]` segments of a reference through attributes and nested blocks."""
        cur = node
        walked = ""
        for s in segs:
            if s.startswith("[") or s == ".*":
                walked += s
                continue
            name = s[1:]
            kids = {**cur.get("attributes", {}), **cur.get("blocks", {})}
            if not kids:
                if "nesting" in cur and cur.get("nesting") == "map":
                    return  # a map attribute: any key
                self.err(where, f"`{ref}`: `{walked.lstrip('.') or name}` has no attribute `{name}`")
                return
            if name not in kids:
                self.err(where, f"`{ref}`: no attribute or block `{name}`")
                return
            cur = kids[name]
            walked += s

    def references(self, where: str, text: str, declared: dict, self_node: dict | None) -> None:
        p = re.escape(self.provider)
        for m in re.finditer(rf"(?<![\w.])(data\.)?({p}_[a-z0-9_]+)\.([a-z_][a-z0-9_]*)({SEG}*)", text):
            kind = "data" if m.group(1) else "resource"
            tf_type, name = m.group(2), m.group(3)
            ref = m.group(0)
            if (kind, tf_type, name) not in declared:
                self.err(where, f"`{ref}` refers to {kind} {tf_type}.{name}, which is not declared")
                continue
            node = self.schema[kind].get(tf_type)
            if node is None:
                continue  # already reported as an unknown type
            segs = re.findall(SEG, m.group(4))
            while segs and segs[0].startswith("["):
                segs.pop(0)  # count/for_each instance key
            self.path(where, ref, node, segs)
        if self_node is not None:
            for m in re.finditer(rf"(?<![\w.])self({SEG}+)", text):
                self.path(where, m.group(0), self_node, re.findall(SEG, m.group(1)))

    def check_dir(self, d: Path) -> int:
        before = len(self.errors)
        docs = {}
        for f in sorted(d.glob("*.tf")):
            with f.open() as fh:
                docs[f.name] = hcl2.load(fh)
        declared = {}
        for fname, doc in docs.items():
            for kind in ("resource", "data"):
                for block in doc.get(kind, []):
                    for t, named in block.items():
                        t = unquote(t)
                        for n, body in named.items():
                            if unquote(n) != "__is_block__" and t.startswith(self.provider + "_"):
                                declared[(kind, t, unquote(n))] = (fname, body)
        checked = 0
        for (kind, t, n), (fname, body) in sorted(declared.items()):
            where = f"{d}/{fname}: {'data.' if kind == 'data' else ''}{t}.{n}"
            node = self.schema[kind].get(t)
            if node is None:
                if f"{kind}.{t}" in self.schema.get("missing", []):
                    self.err(where, f"unknown {'data source' if kind == 'data' else 'resource'} type `{t}`")
                else:
                    # "<extractor> via <the script that ran it>", as extract_schema.py records it.
                    remake = self.schema.get("generated_by", "").rpartition(" via ")[2] or "the extraction"
                    self.err(where, f"`{t}` is not in the extract: re-run {remake}")
                continue
            checked += 1
            self.body(where, body, node, True)
            self.references(where, "\n".join(strings(body)), declared, node)
        for fname, doc in docs.items():
            for block in doc.get("provider", []):
                for pname, body in block.items():
                    if unquote(pname) == self.provider and self.schema.get("provider_config"):
                        self.body(f"{d}/{fname}: provider {self.provider}", body, self.schema["provider_config"], True)
            # References from locals, outputs, modules and variables' conditions.
            for kind in ("locals", "output", "module", "variable"):
                self.references(f"{d}/{fname}: {kind}", "\n".join(strings(doc.get(kind, []))), declared, None)
        print(f"{'PASS' if len(self.errors) == before else 'FAIL'} {d}: {checked} {self.provider} resources and data sources"
              f" against {self.label}" + ("" if len(self.errors) == before else f", {len(self.errors) - before} problems"))
        for e in self.errors[before:]:
            print(f"     {e}")
        return len(self.errors) - before


def constraint_of(d: Path, provider: str) -> str | None:
    for f in sorted(d.glob("*.tf")):
        for t in hcl2.load(f.open()).get("terraform", []):
            for rp in t.get("required_providers", []):
                c = rp.get(provider, {}).get("version") if isinstance(rp.get(provider), dict) else None
                if c:
                    return unquote(c)
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--provider", default="azurerm")
    ap.add_argument("--version")
    ap.add_argument("--ends", action="store_true")
    ap.add_argument("--inside", action="store_true", help="like --ends, every extract inside the constraint")
    ap.add_argument("--schema-dir", type=Path, default=Path(__file__).resolve().parent / "schema")
    args = ap.parse_args()

    extracts = {p.stem.split("-", 1)[1]: p for p in args.schema_dir.glob(f"{args.provider}-*.json")}
    if args.ends or args.inside:
        constraints = {str(d): constraint_of(d, args.provider) for d in args.dirs}
        if len(set(constraints.values())) != 1 or None in constraints.values():
            print(f"FAIL the directories declare different {args.provider} constraints: {constraints}", file=sys.stderr)
            return 1
        c = next(iter(constraints.values()))
        inside = sorted((v for v in extracts if satisfies(v, c)), key=version_tuple)
        if not inside:
            print(f"FAIL no {args.provider} extract satisfies {c!r}: {sorted(extracts)}", file=sys.stderr)
            return 1
        floor = re.search(r">=\s*([0-9.]+)", c)
        if floor and version_tuple(floor.group(1)) != version_tuple(inside[0]):
            print(f"NOTE no extract of {args.provider} {floor.group(1)} itself (no package carries it): "
                  f"the lower end checked is {inside[0]}, the oldest extract inside {c!r}", file=sys.stderr)
        print(" ".join(inside if args.inside else dict.fromkeys([inside[0], inside[-1]])))
        return 0

    if args.version not in extracts:
        print(f"FAIL no extract {args.provider}-{args.version}.json in {args.schema_dir}")
        return 1
    checker = Checker(json.loads(extracts[args.version].read_text()))
    problems = sum(checker.check_dir(d) for d in args.dirs)
    print(f"{args.provider} {args.version}: {problems} problems in {len(args.dirs)} directories")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
