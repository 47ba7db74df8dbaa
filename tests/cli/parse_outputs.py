"""attn-calc's outputs, read back with Python's own parsers (CTest: attn_calc_outputs_parse).

    python3 parse_outputs.py <attn-calc> <scratch directory>

Runs attn-calc with labels that break careless writers (markup, quotes, formula starts,
Markdown and LaTeX specials, Devanagari, CJK, an emoji, commas from a label file) in every
format, and checks that each output is well-formed and gives the labels back as typed: SVG with
xml.etree, JSON with json, CSV with csv (formula starts prefixed with ' as documented), the
Markdown tables by GFM's rules (cells split at unescaped '|', backslash escapes undone); the same
for --self with two heads and a causal mask, and --dot-vs-scaled with a mask matrix. Also parses
the 35x30 and 512x512 maps as SVG, the lessons (--pe, --rope, the norms, --activations, --block,
--no-peeking) as SVG, JSON and csv-long, and --loss-curve with the labels as run names. Exits non-zero with a message on the first problem.
"""

import csv
import io
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

CALC = sys.argv[1]
SCRATCH = sys.argv[2]
os.makedirs(SCRATCH, exist_ok=True)

NOTE_LABELS = ["<tea & co>", "\"q'\"", "]]>", "=1+1", "@SUM(A1)", "-2+3", "+x", "[x]", "a|b", "~x~ &amp; $x$ 2^3",
               "h_j *b* `c`", "मैं", "日本", "\U0001F600", "a, b"]
QUERY_LABELS = ["[CLS]", "-1", "चाय"]


def fail(what):
    print("attn_calc_outputs_parse: " + what)
    sys.exit(1)


def run(*args):
    done = subprocess.run([CALC, *args], capture_output=True)
    if done.returncode != 0:
        fail(" ".join(args) + " exited with " + str(done.returncode) + ": " + done.stderr.decode("utf-8", "replace"))
    return done.stdout.decode("utf-8")  # raises on bytes that are not UTF-8


def write_lines(name, lines):
    path = os.path.join(SCRATCH, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return "@" + path


n = len(NOTE_LABELS)
notes = ";".join(",".join("1" if i == j % 3 else "0" for i in range(3)) for j in range(n))
common = ["--q", "0,0.5,2;2,0,0;1,1,1", "--notes", notes, "--note-labels", write_lines("notes.txt", NOTE_LABELS),
          "--query-labels", write_lines("queries.txt", QUERY_LABELS), "--mask", ",".join(["1"] * (n - 1) + ["0"])]


def svg_texts(text, what):
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        fail(what + " is not well-formed XML: " + str(e))
    return ["".join(e.itertext()) for e in root.iter() if e.tag.endswith("}text")]


# SVG: every label is the text of a label element, as typed
texts = svg_texts(run(*common, "--format", "svg", "--title", "<map> & \"more\""), "the SVG")
for label in NOTE_LABELS + QUERY_LABELS + ["<map> & \"more\""]:
    if label not in texts:
        fail("the SVG does not show the label " + repr(label))

# JSON: the labels and the numbers come back
doc = json.loads(run(*common, "--format", "json", "--jacobian", "--no-attention"))
if doc["inputs"]["note_labels"] != NOTE_LABELS or doc["inputs"]["query_labels"] != QUERY_LABELS:
    fail("JSON labels differ: " + repr(doc["inputs"]["note_labels"]))
for result in doc["results"]:
    if abs(sum(result["weights"]) - 1) > 1e-15 * n:
        fail("JSON weights do not sum to 1")
    if result["rounded"]["weights"][-1] is not None or None in result["rounded"]["weights"][:-1]:
        fail("JSON's rounded weights: null where masked, and only there")


def guarded(label):  # the documented CSV rule: a formula start gets a ' unless it is a plain number
    if label[:1] in ("=", "+", "-", "@") and not re.fullmatch(r"-(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", label):
        return "'" + label
    return label


# CSV, wide and long: the labels (guarded), and numbers that read as numbers
rows = list(csv.reader(io.StringIO(run(*common, "--format", "csv"), newline="")))
if rows[0] != ["query"] + [guarded(x) for x in NOTE_LABELS]:
    fail("the CSV header differs: " + repr(rows[0]))
if [r[0] for r in rows[1:]] != [guarded(x) for x in QUERY_LABELS]:
    fail("the CSV query labels differ: " + repr([r[0] for r in rows[1:]]))
for r in rows[1:]:
    if len(r) != n + 1:
        fail("a CSV row has " + str(len(r)) + " cells")
    [float(x) for x in r[1:-1]]
    if r[-1] != "":  # the masked note: an empty field, apart from a weight of 0.000
        fail("a masked weight in the CSV is not an empty field: " + repr(r[-1]))
rows = list(csv.reader(io.StringIO(run(*common, "--format", "csv-long"), newline="")))
if len(rows) != 1 + 3 * n or any(len(r) != 5 for r in rows):
    fail("csv-long has the wrong shape")
if rows[1 + n - 1][3] != guarded(NOTE_LABELS[-1]) or rows[1][2] != guarded(QUERY_LABELS[0]):
    fail("csv-long labels differ")
if any((r[4] == "") != (int(r[1]) == n) for r in rows[1:]):
    fail("csv-long: a masked weight is not an empty field, or a kept one is")


# Markdown: every table row has the header's number of cells, and the cells read back as typed
def gfm_cells(line):
    cells, cell, i = [], "", 0
    while i < len(line):
        if line[i] == "\\" and i + 1 < len(line):
            cell += line[i:i + 2]
            i += 2
            continue
        if line[i] == "|":
            cells.append(cell)
            cell = ""
        else:
            cell += line[i]
        i += 1
    cells.append(cell)
    return [c.strip() for c in cells[1:-1]]


def unescape(md):  # CommonMark: a backslash before ASCII punctuation is that character
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", md)


md = run(*common, "--format", "md", "--map-only")
table = [line for line in md.splitlines() if line.startswith("|")]
header = gfm_cells(table[0])
if [unescape(c) for c in header[1:-1]] != [x + (" (masked)" if i == n - 1 else "") for i, x in enumerate(NOTE_LABELS)]:
    fail("the Markdown header does not read back: " + repr(header))
for line in table[1:]:
    if len(gfm_cells(line)) != len(header):
        fail("a Markdown row has another number of cells: " + line)
if [unescape(gfm_cells(line)[0]) for line in table[2:]] != QUERY_LABELS:
    fail("the Markdown query labels do not read back")

# --self with two heads, a causal mask and hostile words; --dot-vs-scaled with a mask matrix:
# the grid SVG shows every word, JSON and CSV read back with one entry per map
words = NOTE_LABELS[:6]
sentence = ";".join(",".join(str((t * 3 + i) % 4 - 1) for i in range(4)) for t in range(len(words)))
self_args = ["--self", sentence, "--words", write_lines("words.txt", words), "--heads", "2", "--mask", "causal"]
texts = svg_texts(run(*self_args, "--format", "svg"), "the SVG of two heads")
for label in words + ["head 1", "head 2"]:
    if texts.count(label) < 1:
        fail("the SVG of two heads does not show " + repr(label))
doc = json.loads(run(*self_args, "--format", "json"))
if doc["inputs"]["words"] != words or [m["name"] for m in doc["results"]["maps"]] != ["head 1", "head 2"]:
    fail("the JSON of two heads does not read back")
for m in doc["results"]["maps"]:
    for t, row in enumerate(m["weights"]):
        if any(w != 0 for w in row[t + 1:]) or abs(sum(row) - 1) > 1e-15 * len(words):
            fail("a causal map's row " + str(t) + " sees later words or does not sum to 1: " + repr(row))
rows = list(csv.reader(io.StringIO(run(*self_args, "--format", "csv"), newline="")))
if rows[0] != ["map", "query"] + [guarded(x) for x in words] or len(rows) != 1 + 2 * len(words):
    fail("the CSV of two heads differs: " + repr(rows[0]))
mask = write_lines("mask.txt", [",".join("0" if (t + j) % 4 == 3 else "1" for j in range(n)) for t in range(3)])
compare = [*common, "--mask", mask, "--dot-vs-scaled"]
texts = svg_texts(run(*compare, "--format", "svg"), "the SVG of --dot-vs-scaled")
if not any(t.startswith("dot product: ") for t in texts) or not any(t.startswith("scaled by 1/√3: ") for t in texts):
    fail("the SVG of --dot-vs-scaled does not name its two maps")
doc = json.loads(run(*compare, "--format", "json"))
if [m["name"] for m in doc["results"]["maps"]] != ["dot", "scaled_dot"] or len(doc["options"]["row_mask"]) != 3:
    fail("the JSON of --dot-vs-scaled does not read back")
rows = list(csv.reader(io.StringIO(run(*compare, "--format", "csv-long"), newline="")))
if len(rows) != 1 + 2 * 3 * n or any(len(r) != 6 for r in rows):
    fail("csv-long of --dot-vs-scaled has the wrong shape")

# --beta-sweep: the chart names every note, JSON and CSV give a row per β with the masked note empty
sweep = ["--q", "0,0.5,2", "--notes", notes, "--note-labels", write_lines("notes.txt", NOTE_LABELS),
         "--query-labels", "चाय", "--mask", ",".join(["1"] * (n - 1) + ["0"]), "--beta-sweep", "0:2:0.5"]
texts = svg_texts(run(*sweep, "--format", "svg"), "the SVG of --beta-sweep")
for label in NOTE_LABELS[:-1] + [NOTE_LABELS[-1] + " (masked)"]:
    if label not in texts:
        fail("the chart of --beta-sweep does not name " + repr(label))
doc = json.loads(run(*sweep, "--format", "json"))
if doc["results"]["betas"] != [0, 0.5, 1, 1.5, 2] or len(doc["results"]["weights"]) != 5:
    fail("the JSON of --beta-sweep does not read back")
for row, rounded in zip(doc["results"]["weights"], doc["results"]["rounded"]["weights"]):
    if abs(sum(row) - 1) > 1e-15 * n or rounded[-1] is not None:
        fail("a row of --beta-sweep's JSON does not sum to 1, or its masked note is not null")
rows = list(csv.reader(io.StringIO(run(*sweep, "--format", "csv"), newline="")))
if rows[0] != ["beta"] + [guarded(x) for x in NOTE_LABELS] or len(rows) != 6 or any(r[-1] != "" for r in rows[1:]):
    fail("the CSV of --beta-sweep differs: " + repr(rows[:2]))

# Large maps stay well-formed too
q35 = ";".join(",".join(str((t * 7 + i) % 5) for i in range(4)) for t in range(35))
h30 = ";".join(",".join(str((j * 3 + i) % 4) for i in range(4)) for j in range(30))
svg_texts(run("--q", q35, "--notes", h30, "--format", "svg"), "the 35x30 SVG")
q512 = ";".join(",".join(str((t * 7 + i) % 5 - 2) for i in range(4)) for t in range(512))
big = run("--q", q512, "--notes", q512, "--format", "svg", "--no-values")
svg_texts(big, "the 512x512 SVG")
if len(big.encode("utf-8")) > 4_000_000:
    fail("the 512x512 SVG is " + str(len(big)) + " bytes")

# The lessons: W8's default PE (50 x 32) and a RoPE pair as SVG; every lesson's JSON and
# csv-long, every table's every number once
svg_texts(run("--pe", "--format", "svg"), "the SVG of --pe")
svg_texts(run("--rope", "1,0.5", "--position", "3", "--format", "svg"), "the SVG of --rope")
for lesson in (["--pe", "--positions", "5", "--dim", "4"], ["--rope", "1,2"], ["--layer-norm", "1,2,3,4;0,1,0,1"],
               ["--rms-norm", "1,2"], ["--activations", "-1,0,1"], ["--block"], ["--block", "--pre-ln"],
               ["--no-peeking"]):
    doc = json.loads(run(*lesson, "--format", "json"))
    rows = list(csv.reader(io.StringIO(run(*lesson, "--format", "csv-long"), newline="")))
    if rows[0] != ["table", "i", "j", "row", "column", "value"] or \
            len(rows) - 1 != sum(len(t["values"]) * len(t["values"][0]) for t in doc["tables"]):
        fail("csv-long of " + " ".join(lesson) + " does not hold every table's numbers once")

# --loss-curve: runs named with the labels above (a run column), drawn and tabled; the names come
# back as typed from the SVG's legend, the JSON's titles and the CSV's run column. A log's fields
# are split at every ',' (no CSV quoting) and a ';' is refused: the labels without them
RUNS = [x for x in NOTE_LABELS if not any(ch in x for ch in ",;\"")]
log = os.path.join(SCRATCH, "loss_log.csv")
with open(log, "w", encoding="utf-8", newline="") as f:
    f.write("run,step,loss\n")
    for k, name in enumerate(RUNS):
        for step in range(3):
            f.write("%s,%d,%r\n" % (name, step * 10, 2.0 - 0.5 * step + 0.01 * k))
svg = run("--loss-curve", log, "--vocabulary", "5", "--format", "svg")
texts = svg_texts(svg, "the SVG of --loss-curve")
for name in RUNS:
    if name not in texts:
        fail("the SVG of --loss-curve does not show the run " + repr(name) + " as typed")
if len(ET.fromstring(svg).findall(".//{http://www.w3.org/2000/svg}polyline")) != len(RUNS):
    fail("the SVG of --loss-curve does not draw a line per run")
rows = list(csv.reader(io.StringIO(run("--loss-curve", log, "--format", "csv"), newline="")))
if rows[0] != ["run", "step", "loss"] or len(rows) != 1 + 3 * len(RUNS) or \
        [r[0] for r in rows[1::3]] != [guarded(x) for x in RUNS]:
    fail("the CSV of --loss-curve does not give every run's rows back")
doc = json.loads(run("--loss-curve", log, "--format", "json"))
if len(doc["tables"]) != len(RUNS) or any(x not in t["title"] for x, t in zip(RUNS, doc["tables"])):
    fail("the JSON of --loss-curve does not hold a table per run")
print("attn_calc_outputs_parse: SVG, JSON, CSV, csv-long and Markdown read back as typed, with --self, --dot-vs-scaled, "
      "the lessons and --loss-curve")
