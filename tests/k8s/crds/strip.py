"""Drops the description fields of a CustomResourceDefinition (they are three quarters of
its size and no validation reads them) and keeps every served version's openAPIV3Schema
otherwise unchanged. Usage: python3 strip.py < upstream.yaml > kept.yaml"""
import sys
import yaml


def strip(node):
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if k != "description" or not isinstance(v, str)}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
yaml.safe_dump_all([strip(d) for d in docs], sys.stdout, sort_keys=False, width=100)
