#!/usr/bin/env python3
"""Extract a small Terraform provider schema from a prebuilt CDK provider package.

No azurerm or google provider binary can be fetched here, so `terraform validate` cannot run on
infra/azure or infra/gcp. The prebuilt CDK Terrain / CDKTF provider packages on PyPI
(`cdktn-provider-azurerm`, `cdktn-provider-azapi`, `cdktn-provider-google`,
`cdktf-cdktf-provider-google`) are generated from the provider's own schema (`terraform providers schema
-json`) and carry it in their jsii assembly (`<package>/_jsii/*.jsii.tgz` -> `package/.jsii`, JSON):
one `<Type>Config` struct per resource and data source whose properties are the arguments, optional
or not (jsii `optional`), nested blocks as structs of their own (a single struct for a block with
at most one item, `IResolvable | Struct[]` for a list or set), and one class per type whose getters
are every attribute, computed ones included (a block's computed attributes live on its
`...OutputReference` class, a list block's on the class its `...List.get()` returns). Every
argument's docs link to the registry page with the Terraform name as anchor
(`.../docs/resources/application_insights#local_authentication_enabled`); that anchor, not a
camelCase conversion, gives the snake_case name wherever the docs carry it.

Only the types named on the command line (or found in the given Terraform directories) are kept,
so the committed extract stays small (tests/terraform/azure/schema/<provider>-<version>.json,
tests/terraform/gcp/schema/google-<version>.json).

usage: extract_schema.py WHEEL OUT.json [--provider azurerm] [--expect-version V] [--scan DIR ...] [--type TYPE ...]
                         [--made-by SCRIPT]
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import tarfile
import zipfile
from pathlib import Path

ANCHOR = re.compile(r"/docs/(?:resources|data-sources|guides)?/?[a-z0-9_]*#([a-z0-9_]+) ")
PROVIDER_ANCHOR = re.compile(r"/docs#([a-z0-9_]+) ")
TYPE_LINK = re.compile(r"\{@link https://registry\.terraform\.io/providers/[a-z0-9-]+/([a-z0-9]+)/([0-9.]+)/docs/(resources|data-sources)/[a-z0-9_]+ ([a-z0-9_]+)\}")
PROVIDER_VERSION = re.compile(r"provider version ([0-9][0-9.]*)")


def snake(camel: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()


def load_assembly(wheel: Path) -> tuple[dict, str]:
    """The jsii assembly inside the wheel, and the provider version its README names."""
    with zipfile.ZipFile(wheel) as z:
        tgz = next(n for n in z.namelist() if n.endswith(".jsii.tgz"))
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        m = PROVIDER_VERSION.search(z.read(meta).decode())
        with tarfile.open(fileobj=io.BytesIO(z.read(tgz))) as t:
            assembly = json.load(t.extractfile("package/.jsii"))
    return assembly, (m.group(1) if m else "unknown")


class Extractor:
    def __init__(self, assembly: dict):
        self.types = assembly["types"]

    def tf_name(self, prop: dict) -> str:
        docs = prop.get("docs", {})
        text = " ".join(str(docs.get(k, "")) for k in ("summary", "remarks"))
        for pattern in (ANCHOR, PROVIDER_ANCHOR):
            m = pattern.search(text)
            if m:
                return m.group(1)
        return snake(prop["name"])

    def block_of(self, t: dict) -> tuple[str, str] | None:
        """(nesting, struct fqn) when a config property's type is a nested block."""
        def struct(fqn):
            return fqn if self.types.get(fqn, {}).get("datatype") else None
        if "fqn" in t and struct(t["fqn"]):
            return "single", t["fqn"]
        for u in t.get("union", {}).get("types", []):
            col = u.get("collection", {})
            if col.get("kind") == "array" and struct(col.get("elementtype", {}).get("fqn", "")):
                return "list", col["elementtype"]["fqn"]
        return None

    def computed(self, class_fqn: str | None, known: dict[str, str], depth: int = 0) -> dict:
        """Attributes of a class's getters that are not arguments: computed only, with nesting."""
        out: dict[str, dict] = {}
        cls = self.types.get(class_fqn or "", {})
        props = cls.get("properties", [])
        names = {p["name"] for p in props}
        for p in props:
            n = p["name"]
            if p.get("static") or n == "internalValue" or (n.endswith("Input") and n[:-5] in names):
                continue
            tf = known.get(n) or snake(n)
            if tf in known.values():
                continue  # an argument, described by the config struct
            node: dict = {"computed": True}
            ref = p["type"].get("fqn")
            if ref and depth < 4:
                target = ref
                if ref.endswith("List") or ref.endswith("Map"):
                    get = next((m for m in self.types.get(ref, {}).get("methods", []) if m["name"] == "get"), None)
                    target = get["returns"]["type"].get("fqn") if get else None
                    node["nesting"] = "list" if ref.endswith("List") else "map"
                else:
                    node["nesting"] = "single"
                if target and target.endswith("OutputReference"):
                    node["attributes"] = self.computed(target, {}, depth + 1)
            out[tf] = node
        return dict(sorted(out.items()))

    def struct(self, fqn: str, output_ref: str | None, depth: int = 0) -> dict:
        attrs: dict[str, dict] = {}
        blocks: dict[str, dict] = {}
        camel_to_tf: dict[str, str] = {}
        for p in self.types[fqn].get("properties", []):
            tf = self.tf_name(p)
            camel_to_tf[p["name"]] = tf
            required = not p.get("optional", False)
            blk = self.block_of(p["type"])
            if blk and depth < 6:
                nesting, sub = blk
                sub_ref = sub + "OutputReference" if (sub + "OutputReference") in self.types else None
                blocks[tf] = {"required": required, "nesting": nesting, **self.struct(sub, sub_ref, depth + 1)}
            else:
                attrs[tf] = {"required": required}
        for tf, node in self.computed(output_ref, camel_to_tf, depth).items():
            attrs.setdefault(tf, node)
        return {"attributes": dict(sorted(attrs.items())), "blocks": dict(sorted(blocks.items()))}

    def type_index(self) -> dict[tuple[str, str], str]:
        """(kind, terraform type) -> class fqn, from each class's 'Represents a {@link ... type}' docs."""
        index = {}
        for fqn, t in self.types.items():
            if t.get("kind") != "class":
                continue
            m = TYPE_LINK.search(t.get("docs", {}).get("summary", ""))
            if m and (fqn + "Config") in self.types:
                index[("resource" if m.group(3) == "resources" else "data", m.group(4))] = fqn
        return index


def scan_types(dirs: list[str], provider: str) -> set[tuple[str, str]]:
    found = set()
    block = re.compile(rf'^\s*(resource|data)\s+"({provider}_[a-z0-9_]+)"', re.M)
    for d in dirs:
        for f in sorted(Path(d).glob("*.tf")):
            found |= {(k, t) for k, t in block.findall(f.read_text())}
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("wheel", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--provider", default="azurerm")
    ap.add_argument("--scan", nargs="*", default=[], help="Terraform directories whose resource/data types to keep")
    ap.add_argument("--expect-version", help="fail unless the package carries this provider version")
    ap.add_argument("--type", nargs="*", default=[], help="extra types, as resource.TYPE or data.TYPE")
    ap.add_argument("--made-by", default="scripts/azurerm-schema", help="the script that runs this one (recorded, and named when a type is missing)")
    args = ap.parse_args()

    assembly, version = load_assembly(args.wheel)
    if args.expect_version and version != args.expect_version:
        print(f"{args.wheel.name} carries {args.provider} {version}, not {args.expect_version}", file=sys.stderr)
        return 1
    ex = Extractor(assembly)
    wanted = scan_types(args.scan, args.provider) | {tuple(t.split(".", 1)) for t in args.type}
    index = ex.type_index()
    out = {
        "provider": args.provider,
        "version": version,
        "source": f"{assembly['name']} {assembly['version']} (jsii assembly; generated from the provider's schema)",
        "generated_by": f"tests/terraform/azure/extract_schema.py via {args.made_by}",
        "requested": sorted(f"{k}.{t}" for k, t in wanted),
        "missing": [],
        "provider_config": None,
        "resource": {},
        "data": {},
    }
    ns = f"{assembly['name']}.provider"
    pcls = next((f for f in assembly["types"] if f.startswith(ns + ".") and f.endswith("Provider")), None)
    if pcls and (pcls + "Config") in assembly["types"]:
        out["provider_config"] = ex.struct(pcls + "Config", None)
    for kind, tf_type in sorted(wanted):
        fqn = index.get((kind, tf_type))
        if not fqn:
            out["missing"].append(f"{kind}.{tf_type}")
            continue
        out[kind][tf_type] = ex.struct(fqn + "Config", fqn)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1, sort_keys=False) + "\n")
    print(f"{args.out}: {args.provider} {version} from {assembly['name']} {assembly['version']}: "
          f"{len(out['resource'])} resources, {len(out['data'])} data sources, missing {out['missing'] or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
