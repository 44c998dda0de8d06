"""Does a YAML document read back as written under YAML 1.1 and YAML 1.2?

Every scalar is composed twice, by PyYAML's pure-Python reader and by libyaml's C parser
(CSafeLoader); both give PyYAML's YAML 1.1 resolution (yaml.org/type). The same plain text is
also resolved with the YAML 1.2 core schema (yaml.org/spec/1.2.2, 10.3.2). A plain scalar is
fine when both versions read it as a string, or when both read it as the same number, bool or
null and its text is that value's canonical form (what preflight writes for numbers). Anything
else, such as `0000:07:00.0` (a base-60 float in YAML 1.1), is a problem.

  python3 yamlcheck.py FILE...   prints one line per problem; exit 1 when there is any.
"""
import re
import sys

import yaml

CORE = [  # YAML 1.2 core schema, 10.3.2
    ("null", re.compile(r"^(null|Null|NULL|~|)$")),
    ("bool", re.compile(r"^(true|True|TRUE|false|False|FALSE)$")),
    ("int", re.compile(r"^([-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")),
    ("float", re.compile(r"^([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?"
                         r"|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN))$")),
]
CANONICAL = {
    "int": re.compile(r"^-?(0|[1-9][0-9]*)$"),
    "float": re.compile(r"^(-?[0-9]+\.[0-9]+(e[-+][0-9]+)?|-?\.inf|\.nan)$"),
    "bool": re.compile(r"^(true|false)$"),
    "null": re.compile(r"^null$"),
}


def core_tag(text):
    for tag, rx in CORE:
        if rx.match(text):
            return tag
    return "str"


def short(tag):
    return tag.rsplit(":", 1)[-1]


def walk(node, path, out):
    if isinstance(node, yaml.ScalarNode):
        if node.style:  # quoted (or block): always a string in both versions
            return
        t11, t12 = short(node.tag), core_tag(node.value)
        if t11 == "str" and t12 == "str":
            return
        if t11 == t12 and t11 in CANONICAL and CANONICAL[t11].match(node.value):
            return
        out.append("%s: plain %r reads as %s in YAML 1.1, %s in YAML 1.2"
                   % (path or "/", node.value, t11, t12))
    elif isinstance(node, yaml.SequenceNode):
        for i, c in enumerate(node.value):
            walk(c, "%s[%d]" % (path, i), out)
    elif isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            walk(k, path + "/<key>", out)
            walk(v, "%s/%s" % (path, k.value), out)


def problems(text):
    out = []
    loaders = [yaml.SafeLoader] + ([yaml.CSafeLoader] if hasattr(yaml, "CSafeLoader") else [])
    data = []
    for L in loaders:
        try:
            node = yaml.compose(text, Loader=L)
            data.append(yaml.load(text, Loader=L))
        except yaml.YAMLError as e:
            out.append("%s cannot read it: %s" % (L.__name__, str(e).replace("\n", " ")))
            continue
        if node is not None:
            walk(node, "", out)
    if len(data) == 2 and data[0] != data[1]:
        out.append("PyYAML and libyaml read different documents")
    return sorted(set(out))


def main(argv):
    bad = 0
    for name in argv[1:]:
        with open(name, encoding="utf-8") as f:
            for p in problems(f.read()):
                print("%s: %s" % (name, p))
                bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
