#!/usr/bin/env python3
"""mine_negatives.py: hard negatives for pair corpora from TF-IDF neighbours. For each record of
data/<corpus>/train.jsonl, the records whose queries are nearest to its query (the TF-IDF of
uform_eval, src/eval/tfidf.c: byte 3-5-grams hashed into 2^20 buckets, (1 + ln tf) x idf with
idf = ln((1 + N) / (1 + df)) + 1, rows L2-normalized; fitted on the queries of one lang group)
lend it their first positive as a negative, unless that text equals (case-folded) the record's
query or one of its positives, or the neighbour has the same query. Writes
data/<corpus>/train-negatives.jsonl (every train record in order, `negatives` added where mined)
and negatives-manifest.json. numpy only; deterministic for a seed. See docs/data.md.

Search, per lang group: an inverted index of the queries' n-grams; a query's candidates are the
rows on the posting lists of its --top-grams rarest n-grams that some other query has too, whole
lists rarest first until --candidates entries (the last list read cut to its heaviest entries);
the --rescore best by that partial dot product are scored by the whole cosine and the best valid
ones taken. --verify N compares, for N mined records per group, the mined negative with an
exhaustive search of the group.
"""

import argparse
import hashlib
import json
import multiprocessing
import os
import pathlib
import random
import sys
import time

import numpy as np

BUCKETS = 1 << 20
SHORTEST, LONGEST = 3, 5  # uform_eval's n-gram shape (tools/uform_eval.c)
FNV_OFFSET, FNV_PRIME = 1469598103934665603, 1099511628211
DEFAULT_CORPORA = ("gettext", "libreoffice", "description-translations", "descriptions", "code", "wordnet")
FEATURE_BITS = 20
ROW_BITS = 21  # records of one lang group, posting entries, n-grams of one row: below 2^21
SCORE_BITS = 20  # a posting product's resolution in the partial scores
EXACT_ROWS = 256  # queries whose rows are made dense at once to score candidates exactly, at most
EXACT_CELLS = 1 << 20  # and at most this many cells: rows x their distinct features
EXPANSION_BUDGET = 1 << 23  # posting entries expanded at once (memory bound of one chunk)
TEXT_CHUNK_BYTES = 1 << 22  # text bytes hashed at once


class InputError(ValueError):
    pass


def _no_duplicate_keys(pairs):
    result = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _strings(value):
    return isinstance(value, list) and all(isinstance(item, str) and item for item in value)


def parse_record(line):
    """The pair record of one JSONL line (a dict), or a ValueError naming the problem."""
    record = json.loads(line, object_pairs_hook=_no_duplicate_keys)
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    if "text" in record or "image" in record:
        raise ValueError("not a pair record (has 'text' or 'image')")
    if not isinstance(record.get("query"), str) or not record["query"]:
        raise ValueError("'query' must be a non-empty string")
    if not _strings(record.get("positives")) or not record["positives"]:
        raise ValueError("'positives' must be a non-empty list of non-empty strings")
    if "negatives" in record and not _strings(record["negatives"]):
        raise ValueError("'negatives' must be a list of non-empty strings")
    if "lang" in record and not isinstance(record["lang"], str):
        raise ValueError("'lang' must be a string")
    return record


def read_pairs(path):
    """[(line without its newline, record)] of a pair JSONL file (blank lines skipped); a malformed
    line raises InputError 'PATH:LINE: problem'."""
    rows = []
    with open(path, "rb") as file:
        for number, raw in enumerate(file, 1):
            try:
                line = raw.decode("utf-8")
                if number == 1:
                    line = line.removeprefix("\ufeff")
                line = line.rstrip("\r\n")
                if not line.strip():
                    continue
                rows.append((line, parse_record(line)))
            except ValueError as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
                raise InputError(f"{path}:{number}: {error}") from None
    return rows


def hash_windows(data, first, length):
    """FNV-1a (64-bit, seeded with the length, high bits folded in) of data[first:first+length] for
    every start in `first`, masked to the buckets: uform_ngram_hash_ of src/eval/tfidf.c."""
    hashes = np.full(len(first), FNV_OFFSET ^ length, dtype=np.uint64)
    prime = np.uint64(FNV_PRIME)
    for offset in range(length):
        hashes ^= data[first + offset]
        hashes *= prime
    hashes ^= hashes >> np.uint64(29)
    return (hashes & np.uint64(BUCKETS - 1)).astype(np.int64)


def ngram_counts(texts):
    """(documents, features, counts): the distinct hashed n-grams of each text with their counts,
    sorted by document then feature. A text shorter than SHORTEST bytes is one feature, itself."""
    documents, features, counts = [], [], []
    begin = 0
    while begin < len(texts):
        end, size = begin, 0
        while end < len(texts) and (end == begin or size + len(texts[end]) <= TEXT_CHUNK_BYTES):
            size += len(texts[end])
            end += 1
        chunk = texts[begin:end]
        data = np.frombuffer(b"".join(chunk), dtype=np.uint8)
        lengths = np.fromiter((len(text) for text in chunk), dtype=np.int64, count=len(chunk))
        starts = np.cumsum(lengths) - lengths
        keys = []
        for length in range(1, LONGEST + 1):
            windows = (lengths == length).astype(np.int64) if length < SHORTEST else np.maximum(lengths - length + 1, 0)
            if length >= SHORTEST or windows.any():
                total = int(windows.sum())
                document = np.repeat(np.arange(begin, end, dtype=np.int64), windows)
                first = np.repeat(starts - (np.cumsum(windows) - windows), windows) + np.arange(total)
                keys.append(document << FEATURE_BITS | hash_windows(data, first, length))
        unique, count = np.unique(np.concatenate(keys), return_counts=True)
        documents.append((unique >> FEATURE_BITS).astype(np.int32))
        features.append((unique & (BUCKETS - 1)).astype(np.int32))
        counts.append(count)
        begin = end
    return np.concatenate(documents), np.concatenate(features), np.concatenate(counts)


def inverse_document_frequency(frequency, documents):
    """idf = ln((1 + N) / (1 + df)) + 1, as uform_tfidf_fit."""
    return np.log((1.0 + documents) / (1.0 + frequency)) + 1.0


class Index:
    """The TF-IDF rows of a group's queries (CSR, sorted by document then feature) and their
    inverted index, each posting list ordered by weight (heaviest first)."""

    def __init__(self, texts):
        self.size = len(texts)
        self.documents, self.features, counts = ngram_counts(texts)
        self.frequency = np.bincount(self.features, minlength=BUCKETS)
        idf = inverse_document_frequency(self.frequency, self.size)
        weights = (1.0 + np.log(counts)) * idf[self.features]
        norms = np.sqrt(np.bincount(self.documents, weights=weights * weights, minlength=self.size))
        self.weights = weights / norms[self.documents]
        self.keys = self.documents.astype(np.int64) << FEATURE_BITS | self.features  # ascending
        self.row_starts = np.concatenate(([0], np.cumsum(np.bincount(self.documents, minlength=self.size))))
        if self.size >= 1 << ROW_BITS:
            raise ValueError(f"a lang group of {self.size} records: at most {(1 << ROW_BITS) - 1}")
        order = np.argsort(pack((self.features, FEATURE_BITS), (descending(self.weights, 22), 22),
                                (self.documents, ROW_BITS)))  # distinct keys: the order is unique
        self.posting_documents = self.documents[order]
        self.posting_weights = self.weights[order]
        self.posting_starts = np.concatenate(([0], np.cumsum(self.frequency)))

    def rarest(self, top, budget):
        """(documents, features, weights, lengths) of each row's `top` rarest features among those
        some other row has too (ties: in feature order), sorted by document, and how many entries
        of each one's posting list to read: whole lists, rarest first, until `budget` entries (the
        last list read cut to its heaviest entries)."""
        shared = np.flatnonzero(self.frequency[self.features] >= 2)
        documents = self.documents[shared]
        offsets = shared - self.row_starts[documents]
        key = np.sort(pack((documents, ROW_BITS), (self.frequency[self.features[shared]], ROW_BITS), (offsets, ROW_BITS)))
        documents = key >> (2 * ROW_BITS)
        order = self.row_starts[documents] + (key & ((1 << ROW_BITS) - 1))
        order = order[rank_within(documents) < top]
        documents, features = self.documents[order], self.features[order]
        frequency = self.frequency[features]
        before = np.cumsum(frequency) - frequency
        before -= before[np.searchsorted(documents, documents, side="left")]
        lengths = np.clip(budget - before, 0, frequency)
        keep = lengths > 0
        return documents[keep], features[keep], self.weights[order][keep], lengths[keep]

    def exact(self, queries, candidates):
        """Cosines of the row pairs (queries[i], candidates[i]), queries ascending: the rows of up
        to EXACT_ROWS consecutive queries (fewer for long rows: EXACT_CELLS) as a dense matrix
        over their features, each candidate's features looked up in it."""
        scores = np.zeros(len(queries))
        lengths = self.row_starts[candidates + 1] - self.row_starts[candidates]
        work = np.cumsum(lengths)
        column = np.full(BUCKETS, -1, dtype=np.int64)
        begin = 0
        while begin < len(queries):
            first = int(queries[begin])
            span = np.arange(1, min(EXACT_ROWS, self.size - first) + 1)
            span = span[span * (self.row_starts[first + span] - self.row_starts[first]) <= EXACT_CELLS]
            end = min(int(np.searchsorted(queries, first + (int(span[-1]) if len(span) else 1))),
                      int(np.searchsorted(work, (work[begin - 1] if begin else 0) + EXPANSION_BUDGET, side="right")))
            end = max(end, begin + 1)
            low, high = self.row_starts[first], self.row_starts[queries[end - 1] + 1]
            features = np.unique(self.features[low:high])
            column[features] = np.arange(len(features))
            dense = np.zeros((int(queries[end - 1]) - first + 1, len(features) + 1))  # the last column: absent
            dense[self.documents[low:high] - first, column[self.features[low:high]]] = self.weights[low:high]
            pair = np.repeat(np.arange(end - begin), lengths[begin:end])
            entry = expand(self.row_starts[candidates[begin:end]], lengths[begin:end])
            products = dense[queries[begin:end][pair] - first, column[self.features[entry]]] * self.weights[entry]
            scores[begin:end] = np.bincount(pair, weights=products, minlength=end - begin)
            column[features] = -1
            begin = end
        return scores


def descending(values, bits):
    """Values in [0, 1] as integers below 2^bits that sort the other way round."""
    return np.round((1.0 - np.clip(values, 0.0, 1.0)) * float((1 << bits) - 1)).astype(np.int64)


def pack(*fields):
    """One int64 sort key of (values, bits) fields, the first most significant."""
    if sum(bits for _, bits in fields) > 63:
        raise ValueError("sort key wider than 63 bits")
    key = np.zeros(len(fields[0][0]), dtype=np.int64)
    for values, bits in fields:
        key = key << bits | np.asarray(values, dtype=np.int64)
    return key


def expand(starts, lengths):
    """The indices start, start+1, ..., start+length-1 of every (start, length), concatenated."""
    total = int(lengths.sum())
    return np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(total)


def casefold_ids(records):
    """(query ids, first-positive ids, forbidden keys, texts): every case-folded text as a number
    below `texts`; the sorted forbidden keys row * texts + id name the other positives of rows
    with more than one."""
    ids = {}
    number = lambda text: ids.setdefault(text.casefold(), len(ids))  # noqa: E731
    queries = np.array([number(record["query"]) for record in records], dtype=np.int64)
    firsts = np.array([number(record["positives"][0]) for record in records], dtype=np.int64)
    rows, forbidden = [], []
    for row, record in enumerate(records):
        for text in record["positives"][1:]:
            rows.append(row), forbidden.append(number(text))
    texts = max(len(ids), 1)
    keys = np.unique(np.array(rows, dtype=np.int64) * texts + np.array(forbidden, dtype=np.int64))
    return queries, firsts, keys, texts


def invalid_pairs(query, candidate, queries, firsts, forbidden, texts, others=True):
    """Which candidates a query may not take: the same query, or a first positive equal to the
    query or to one of its positives (all case-folded); `others` False leaves out the positives
    after the first (the costly check, made on fewer pairs)."""
    first = firsts[candidate]
    invalid = (queries[candidate] == queries[query]) | (first == queries[query]) | (first == firsts[query])
    if others and len(forbidden):
        invalid |= np.isin(query * texts + first, forbidden)
    return invalid


def run_starts(values):
    """Where each run of equal values of an array begins."""
    return np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1]))) if len(values) else np.zeros(0, np.int64)


def rank_within(groups):
    """Each position's rank among the equal values of a sorted array."""
    starts = run_starts(groups)
    return np.arange(len(groups)) - np.repeat(starts, np.diff(np.append(starts, len(groups))))


def mine_group(records, chosen, parameters, progress=None):
    """Mines one lang group: {row: [neighbour rows]} for the chosen rows, and counts."""
    index = Index([record["query"].encode("utf-8") for record in records])
    queries, firsts, forbidden, texts = casefold_ids(records)
    documents, features, weights, lengths = index.rarest(parameters["top_grams"], parameters["candidates"])
    take = np.isin(documents, chosen)
    documents, features, weights, lengths = documents[take], features[take], weights[take], lengths[take]
    work = np.cumsum(lengths)
    mined, skipped = {}, 0
    begin = 0
    while begin < len(documents):
        end = int(np.searchsorted(work, (work[begin - 1] if begin else 0) + EXPANSION_BUDGET, side="right"))
        end = max(end, begin + 1)  # then to the end of that row: a row is never split
        end = int(np.searchsorted(documents, documents[end - 1], side="right"))
        rows, cut = documents[begin:end], lengths[begin:end]
        first_row = int(rows[0])
        # partial scores: (query, candidate, product) packed into one key, sorted, summed per pair
        posting = expand(index.posting_starts[features[begin:end]], cut)
        query = np.repeat(rows.astype(np.int64) - first_row, cut)
        candidate = index.posting_documents[posting].astype(np.int64)
        products = np.round(np.repeat(weights[begin:end], cut) * index.posting_weights[posting] * ((1 << SCORE_BITS) - 1))
        other = candidate != query + first_row
        key = np.sort(pack((query[other], ROW_BITS), (candidate[other], ROW_BITS), (products[other], SCORE_BITS)))
        del posting, query, candidate, products, other
        pair = key >> SCORE_BITS
        starts = run_starts(pair)
        partial = np.add.reduceat(key & ((1 << SCORE_BITS) - 1), starts) if len(key) else np.zeros(0, np.int64)
        query, candidate = (pair[starts] >> ROW_BITS) + first_row, pair[starts] & ((1 << ROW_BITS) - 1)
        del key, pair, starts
        invalid = invalid_pairs(query, candidate, queries, firsts, forbidden, texts, others=False)
        skipped += int(invalid.sum())
        query, candidate, partial = query[~invalid], candidate[~invalid], partial[~invalid]
        # the --rescore best of each query by the partial score, then by the whole cosine
        widest = SCORE_BITS + 1  # a partial score is at most the cosine, 1, plus rounding
        key = np.sort(pack((query - first_row, ROW_BITS), ((1 << widest) - 1 - np.minimum(partial, (1 << widest) - 1), widest),
                           (candidate, ROW_BITS)))
        query, candidate = (key >> (widest + ROW_BITS)) + first_row, key & ((1 << ROW_BITS) - 1)
        best = rank_within(query) < parameters["rescore"]
        query, candidate = query[best], candidate[best]
        invalid = np.isin(query * texts + firsts[candidate], forbidden) if len(forbidden) else np.zeros(len(query), bool)
        skipped += int(invalid.sum())
        query, candidate = query[~invalid], candidate[~invalid]
        score = index.exact(query, candidate)
        order = np.lexsort((candidate, -score, query))
        query, candidate = query[order], candidate[order]
        # one negative per distinct (case-folded) text, then the first K of each row
        _, first_seen = np.unique(query * texts + firsts[candidate], return_index=True)
        distinct = np.zeros(len(query), dtype=bool)
        distinct[first_seen] = True
        query, candidate = query[distinct], candidate[distinct]
        keep = rank_within(query) < parameters["negatives"]
        for row, neighbour in zip(query[keep].tolist(), candidate[keep].tolist()):
            mined.setdefault(row, []).append(neighbour)
        if progress is not None:
            with progress.get_lock():
                progress.value += len(np.unique(rows))
        begin = end
    if progress is not None:  # the chosen rows without a shared n-gram
        with progress.get_lock():
            progress.value += len(chosen) - len(np.unique(documents))
    verified = verify(index, records, mined, queries, firsts, forbidden, texts, parameters) if parameters["verify"] else None
    return mined, skipped, verified


def verify(index, records, mined, queries, firsts, forbidden, texts, parameters):
    """For up to `verify` mined rows (seeded), the exhaustive best valid neighbour: how often the
    mined negative is it (the same text), and the mean ratio of their cosines."""
    rows = sorted(mined)
    sample = random.Random(parameters["seed"]).sample(rows, min(parameters["verify"], len(rows)))
    same, ratios = 0, []
    dense = np.zeros(BUCKETS)
    for row in sample:
        entries = slice(index.row_starts[row], index.row_starts[row + 1])
        dense[index.features[entries]] = index.weights[entries]
        scores = np.bincount(index.documents, weights=dense[index.features] * index.weights, minlength=index.size)
        dense[index.features[entries]] = 0.0
        candidate = np.arange(index.size)
        valid = (candidate != row) & ~invalid_pairs(np.full(index.size, row), candidate, queries, firsts, forbidden, texts)
        best = int(np.flatnonzero(valid)[np.argmax(scores[valid])])
        negative = mined[row][0]
        same += records[negative]["positives"][0].casefold() == records[best]["positives"][0].casefold()
        ratios.append(scores[negative] / scores[best] if scores[best] > 0 else 1.0)
    return {"sampled": len(sample), "same_as_exhaustive": same, "cosine_ratio_sum": float(sum(ratios))}


_JOBS = []
_PROGRESS = None


def _initialize(progress):
    global _PROGRESS
    _PROGRESS = progress


def _run_job(number):
    started = time.monotonic()
    records, chosen, parameters = _JOBS[number]
    mined, skipped, verified = mine_group(records, chosen, parameters, _PROGRESS)
    return number, mined, skipped, verified, time.monotonic() - started


def lang_groups(rows):
    """{lang (None when absent): [row numbers]} in file order."""
    groups = {}
    for number, (_, record) in enumerate(rows):
        groups.setdefault(record.get("lang"), []).append(number)
    return groups


def chosen_rows(count, fraction, seed, corpus):
    """The rows that get negatives: all for fraction 1, else a seeded sample of round(F x count)."""
    if fraction >= 1.0:
        return np.arange(count)
    picked = random.Random(f"{seed}:{corpus}").sample(range(count), round(fraction * count))
    return np.array(sorted(picked), dtype=np.int64)


def atomic_write(path, chunks):
    """Writes the byte chunks to a temporary file beside path, fsyncs it and renames it over path;
    returns the sha256 of what was written."""
    path = pathlib.Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    digest = hashlib.sha256()
    try:
        with open(temporary, "wb") as file:
            for chunk in chunks:
                digest.update(chunk)
                file.write(chunk)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return digest.hexdigest()


def output_lines(rows, negatives_of):
    for number, (line, record) in enumerate(rows):
        negatives = negatives_of.get(number)
        if negatives:
            record = dict(record)
            record["negatives"] = list(dict.fromkeys(record.get("negatives", []) + negatives))
            line = json.dumps(record, ensure_ascii=False, separators=(", ", ": "))
        yield (line + "\n").encode("utf-8")


def show(message, quiet):
    if not quiet:
        print(f"mine_negatives: {message}", file=sys.stderr, flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="*",
                        help="corpus folders under --data; none: those of " + ", ".join(DEFAULT_CORPORA) + " that exist")
    parser.add_argument("--data", default=str(pathlib.Path(__file__).resolve().parents[2] / "data"),
                        help="folder of <corpus>/train.jsonl (default: data/ of the repository)")
    parser.add_argument("--output", help="folder to write <corpus>/train-negatives.jsonl into (default: --data)")
    parser.add_argument("--negatives", type=int, default=1, help="negatives mined per record (default 1)")
    parser.add_argument("--fraction", type=float, default=1.0, help="share of each corpus' records that get negatives, a seeded choice (default 1.0)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the --fraction choice and the --verify sample (default 0)")
    parser.add_argument("--top-grams", type=int, default=32,
                        help="a query's rarest n-grams (shared with another query) whose posting lists give its candidates (default 32)")
    parser.add_argument("--candidates", type=int, default=512,
                        help="posting entries read per query: whole lists of its rarest n-grams first (default 512)")
    parser.add_argument("--rescore", type=int, default=8,
                        help="candidates per query, best by the partial score, scored by the whole cosine (default 8)")
    parser.add_argument("--verify", type=int, default=0,
                        help="mined records per lang group checked against an exhaustive search, reported in the manifest (default 0)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes, one lang group at a time each (default: the CPU count)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    arguments = parser.parse_args(argv)
    if arguments.negatives < 1 or arguments.top_grams < 1 or arguments.candidates < 1 or arguments.workers < 1:
        parser.error("--negatives, --top-grams, --candidates and --workers must be at least 1")
    if arguments.rescore < arguments.negatives:
        parser.error("--rescore must be at least --negatives")
    if not 0.0 < arguments.fraction <= 1.0 or arguments.verify < 0:
        parser.error("--fraction must be in (0, 1] and --verify at least 0")
    started = time.monotonic()
    data = pathlib.Path(arguments.data)
    output = pathlib.Path(arguments.output) if arguments.output else data
    corpora = arguments.corpora or [name for name in DEFAULT_CORPORA if (data / name / "train.jsonl").is_file()]
    if not corpora:
        parser.error(f"no corpus found under {data}")
    parameters = {"negatives": arguments.negatives, "fraction": arguments.fraction, "seed": arguments.seed,
                  "top_grams": arguments.top_grams, "candidates": arguments.candidates,
                  "rescore": arguments.rescore, "verify": arguments.verify,
                  "ngrams": [SHORTEST, LONGEST], "buckets": BUCKETS}
    corpus_rows, jobs, job_rows = {}, [], []
    try:
        for corpus in corpora:
            path = data / corpus / "train.jsonl"
            rows = corpus_rows[corpus] = read_pairs(path)
            chosen = set(chosen_rows(len(rows), arguments.fraction, arguments.seed, corpus).tolist())
            for lang, members in lang_groups(rows).items():
                local = np.array([i for i, row in enumerate(members) if row in chosen], dtype=np.int64)
                jobs.append(([rows[row][1] for row in members], local, parameters))
                job_rows.append((corpus, lang, members))
            show(f"read {path}: {len(rows)} records, {time.monotonic() - started:.1f} s", arguments.quiet)
    except (OSError, InputError) as error:
        sys.exit(f"mine_negatives: {error}")
    _JOBS[:] = jobs
    total = sum(len(local) for _, local, _ in jobs)
    order = sorted(range(len(jobs)), key=lambda number: -len(jobs[number][0]))  # largest first
    progress = multiprocessing.get_context("fork").Value("q", 0)
    results = {}
    mining = time.monotonic()
    with multiprocessing.get_context("fork").Pool(arguments.workers, _initialize, (progress,)) as pool:
        pending = pool.map_async(_run_job, order, chunksize=1)
        while not pending.ready():
            pending.wait(5.0)
            show(f"{progress.value}/{total} records, {time.monotonic() - mining:.0f} s", arguments.quiet)
        for number, mined, skipped, verified, seconds in pending.get():
            results[number] = (mined, skipped, verified, seconds)
    mining_seconds = time.monotonic() - mining
    summary = {}
    for corpus in corpora:
        rows, negatives_of = corpus_rows[corpus], {}
        report = {"corpus": corpus, "script": "scripts/data/mine_negatives.py", "records": len(rows), "mined": 0,
                  "negatives": 0, "without_negative": 0, "skipped_candidates": 0, "groups": {},
                  "group_seconds": 0.0, "parameters": parameters}
        checked = {"sampled": 0, "same_as_exhaustive": 0, "cosine_ratio_sum": 0.0}
        for number, (name, lang, members) in enumerate(job_rows):
            if name != corpus:
                continue
            mined, skipped, verified, seconds = results[number]
            for row, neighbours in mined.items():
                negatives_of[members[row]] = [jobs[number][0][n]["positives"][0] for n in neighbours]
            report["groups"][lang if lang is not None else ""] = {"records": len(members), "mined": len(mined)}
            report["without_negative"] += len(jobs[number][1]) - len(mined)
            report["skipped_candidates"] += skipped
            report["group_seconds"] += seconds
            for key in checked if verified else ():
                checked[key] += verified[key]
        report["mined"] = len(negatives_of)
        report["negatives"] = sum(len(negatives) for negatives in negatives_of.values())
        report["group_seconds"] = round(report["group_seconds"], 2)
        if arguments.verify:
            report["verified"] = {"sampled": checked["sampled"], "same_as_exhaustive": checked["same_as_exhaustive"],
                                  "mean_cosine_ratio": round(checked["cosine_ratio_sum"] / max(checked["sampled"], 1), 4)}
        folder = output / corpus
        folder.mkdir(parents=True, exist_ok=True)
        report["output"] = {"file": "train-negatives.jsonl", "records": len(rows),
                            "sha256": atomic_write(folder / "train-negatives.jsonl", output_lines(rows, negatives_of))}
        report["seconds"] = {"mining_all_corpora": round(mining_seconds, 2), "run": round(time.monotonic() - started, 2)}
        manifest = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
        atomic_write(folder / "negatives-manifest.json", [manifest.encode("utf-8")])
        summary[corpus] = report
        show(f"{corpus}: {report['mined']}/{len(rows)} records mined, {report['without_negative']} without a negative, "
             f"{report['skipped_candidates']} candidates skipped -> {folder / 'train-negatives.jsonl'}", arguments.quiet)
    show(f"done: {sum(r['mined'] for r in summary.values())} records mined in {time.monotonic() - started:.1f} s "
         f"({mining_seconds:.1f} s mining, {arguments.workers} workers)", arguments.quiet)
    return summary


if __name__ == "__main__":
    main()
