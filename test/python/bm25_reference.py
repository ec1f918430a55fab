"""Reference BM25 scores from the real rank_bm25 library, for parity tests and the benchmark.

Reads one JSON object (from the file named by argv[1], or stdin) and prints one JSON object.
{"batch": [spec, ...]} runs several specs in one interpreter and prints {"batch": [result, ...]}.

Input:
  {
    "mode": "raw" | "tokens",          raw: docs/paths/queries are strings, tokenized here with the
                                       CodeGrep App. E tokenizer; tokens: they are lists of tokens
    "docs": [...],                     content documents, in insertion order
    "paths": [...] | null,             path documents (same order); null → no path index
    "path_weight": 2,                  combined = content + path_weight * path   (App. E "Path signal")
    "queries": [...],
    "k1": 1.5, "b": 0.75, "epsilon": 0.25,
    "emit_scores": true,               full combined score vectors per query
    "emit_tokens": false,              the tokenized docs/paths/queries (raw mode)
    "emit_parts": false,               content and path score vectors separately as well
    "emit_idf": false,                 the content index's idf table
    "top": null | int                  rankings cut to this many ids (null → full ranking)
  }
Output:
  { "scores": [[...]], "rankings": [[...]], "content_scores"/"path_scores": [[...]], "tokens": {...},
    "idf": {...}, "average_idf": x, "path_average_idf": x,
    "timing": { "build_s": x, "query_s": [x, ...], "build_cpu_s": x, "queries_cpu_s": x } }
Rankings order documents by (-score, insertion index): ties broken by insertion order (App. E).
Timing covers tokenization, index construction, scoring and ranking, not interpreter start or JSON I/O;
wall-clock (perf_counter) per phase and per query, and process CPU time (process_time) per phase. With
emit_scores/emit_parts the query loop also converts score vectors to lists: bench with them off.
"""

import json
import re
import sys
import time

import numpy as np
from rank_bm25 import BM25Okapi

_STRIP = re.compile(r"[^a-zA-Z0-9_./]")


def tokenize(text):
    """CodeGrep App. E: split on whitespace, strip chars outside [a-zA-Z0-9_./], lower-case,
    drop tokens shorter than 2 characters, drop tokens beginning with http."""
    out = []
    for word in text.split():
        token = _STRIP.sub("", word).lower()
        if len(token) < 2 or token.startswith("http"):
            continue
        out.append(token)
    return out


def ranking(scores, top):
    order = np.argsort(-scores, kind="stable")
    if top is not None:
        order = order[:top]
    return [int(i) for i in order]


def run(spec):
    mode = spec.get("mode", "tokens")
    k1, b, epsilon = spec.get("k1", 1.5), spec.get("b", 0.75), spec.get("epsilon", 0.25)
    path_weight = spec.get("path_weight", 2)
    top = spec.get("top")
    prep = tokenize if mode == "raw" else (lambda x: x)

    started = time.perf_counter()
    started_cpu = time.process_time()
    docs = [prep(d) for d in spec["docs"]]
    content = BM25Okapi(docs, k1=k1, b=b, epsilon=epsilon)
    paths = None
    path_index = None
    if spec.get("paths") is not None:
        paths = [prep(p) for p in spec["paths"]]
        path_index = BM25Okapi(paths, k1=k1, b=b, epsilon=epsilon)
    build_s = time.perf_counter() - started
    build_cpu_s = time.process_time() - started_cpu

    emit_parts = spec.get("emit_parts", False)
    scores_out, rankings_out, query_s, queries, content_out, path_out = [], [], [], [], [], []
    queries_cpu_started = time.process_time()
    for q in spec["queries"]:
        t0 = time.perf_counter()
        tokens = prep(q)
        content_scores = content.get_scores(tokens)
        scores = content_scores
        if path_index is not None:
            path_scores = path_index.get_scores(tokens)
            scores = content_scores + path_weight * path_scores
        ranked = ranking(scores, top)
        query_s.append(time.perf_counter() - t0)
        if emit_parts:
            content_out.append([float(s) for s in content_scores])
            if path_index is not None:
                path_out.append([float(s) for s in path_scores])
        queries.append(tokens)
        rankings_out.append(ranked)
        if spec.get("emit_scores", True):
            scores_out.append([float(s) for s in scores])

    queries_cpu_s = time.process_time() - queries_cpu_started
    result = {
        "rankings": rankings_out,
        "timing": {"build_s": build_s, "query_s": query_s, "build_cpu_s": build_cpu_s, "queries_cpu_s": queries_cpu_s},
        "average_idf": content.average_idf,
    }
    if spec.get("emit_idf", False):
        result["idf"] = content.idf
    if emit_parts:
        result["content_scores"] = content_out
        result["path_scores"] = path_out if path_index is not None else None
    if spec.get("emit_scores", True):
        result["scores"] = scores_out
    if path_index is not None:
        result["path_average_idf"] = path_index.average_idf
    if spec.get("emit_tokens", False):
        result["tokens"] = {"docs": docs, "paths": paths, "queries": queries}
    return result


def main():
    raw = open(sys.argv[1], encoding="utf-8").read() if len(sys.argv) > 1 else sys.stdin.read()
    request = json.loads(raw)
    if "batch" in request:
        json.dump({"batch": [run(spec) for spec in request["batch"]]}, sys.stdout)
    else:
        json.dump(run(request), sys.stdout)


if __name__ == "__main__":
    main()
