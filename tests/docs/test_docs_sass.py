"""The SASS report (stepwise_docs/sass_report.py), its reader (stepwise_docs.sass) and the stepwise-sass directive.

tests/docs/fixtures/sass/cuobjdump-sass-divergence.txt is a captured ``cuobjdump -sass`` listing,
trimmed (see the README beside it): the counts below are those of the trimmed file. The script
runs end to end with a fake cuobjdump that prints it. The directive is built with the FIXTURE
project and a made-up report (FIXTURE counts, not the compiler's).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import synth
from stepwise_docs import sass, sass_report
from stepwise_docs.data import DataError, Dataset
from stepwise_docs.steps import same_source_parts

PY = sys.executable
SCRIPT = synth.REPO / "docs" / "_ext" / "stepwise_docs" / "sass_report.py"
LISTING = synth.FIXTURES / "sass" / "cuobjdump-sass-divergence.txt"
VERSION = """cuobjdump: NVIDIA (R) fat binary listing tool
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Thu_Aug_14_07:26:37_PM_PDT_2025
Cuda compilation tools, release 13.0, V13.0.85
Build cuda_13.0.r13.0/compiler.36400806_0
"""
INTERLEAVED = "_ZN8stepwise10divergence18interleaved_branch13branch_kernelEPKfPfi"
needs_cxxfilt = pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt is not installed")
needs_doxygen = pytest.mark.skipif(shutil.which("doxygen") is None, reason="doxygen is not installed")


def functions_by_name(data: dict) -> dict[str, dict]:
    return {f["name"]: f for f in data["functions"]}


# -- parsing the listing ---------------------------------------------------------------------

def test_fixture_is_a_cuobjdump_listing():
    text = LISTING.read_text(encoding="utf-8")
    assert text.lstrip().startswith("Fatbin elf code:") and "arch = sm_90" in text
    functions = sass_report.split_functions(text)
    assert [f["mangled"] for f in functions] == [
        "_ZN8stepwise9occupancy13sum_matrix_2d17sum_matrix_kernelILi32ELi16EEEvPKfS4_Pfii",
        "_ZN8stepwise10divergence19warp_aligned_branch13branch_kernelEPKfPfi",
        "_ZN8stepwise10divergence18predicate_variable13branch_kernelEPKfPfi",
        INTERLEAVED,
    ]
    assert {f["arch"] for f in functions} == {"sm_90"}


def test_instruction_count_is_every_instruction_line_but_nop():
    """Independently of the parser: lines that start with an address, less the NOPs."""
    text = LISTING.read_text(encoding="utf-8")
    body = text[text.index(INTERLEAVED):]
    body = body[:body.index("..........")]
    lines = [line for line in body.splitlines() if re.match(r"\s*/\*[0-9a-f]{4}\*/", line)]
    expected = len([line for line in lines if " NOP" not in line])
    function = next(f for f in sass_report.split_functions(text) if f["mangled"] == INTERLEAVED)
    assert len(function["instructions"]) == len(lines)
    assert sass_report.count(function["instructions"])["instructions"] == expected == 56


@needs_cxxfilt
def test_counts_and_listing_of_the_fixture():
    data = sass_report.report(LISTING.read_text(encoding="utf-8"), "divergence_steps.cu.o",
                              "cuobjdump 13.0.85", "stepwise::divergence::")
    assert data["tool"] == "cuobjdump 13.0.85" and data["arch"] == "sm_90"
    assert data["object"] == "divergence_steps.cu.o"
    functions = functions_by_name(data)
    assert list(functions) == [  # sorted by name; the occupancy kernel is not in the namespace
        "stepwise::divergence::interleaved_branch::branch_kernel",
        "stepwise::divergence::predicate_variable::branch_kernel",
        "stepwise::divergence::warp_aligned_branch::branch_kernel",
    ]
    interleaved = functions["stepwise::divergence::interleaved_branch::branch_kernel"]
    assert interleaved["mangled"] == INTERLEAVED and interleaved["arch"] == "sm_90"
    assert interleaved["counts"] == {"instructions": 56, "bra": 3, "bssy": 1, "bsync": 1, "warpsync": 0,
                                     "exit": 2, "predicated": 2,
                                     "mufu": {"MUFU.COS": 6, "MUFU.SIN": 6}, "mma": {}}
    assert interleaved["listing"] == [
        "/*00d0*/       BSSY B0, 0x8130 ;",
        "/*0100*/   @P0 BRA 0x4120 ;",
        "/*01c0*/       MUFU.COS R19, R19 ;",
        "              ... (4 more MUFU.COS)",
        "/*40d0*/       MUFU.COS R5, R4 ;",
        "/*4110*/       BRA 0x8120 ;",
        "/*41a0*/       MUFU.SIN R17, R4 ;",
        "              ... (4 more MUFU.SIN)",
        "/*80e0*/       MUFU.SIN R5, R4 ;",
        "/*8120*/       BSYNC B0 ;",
        "/*8180*/       BRA 0x8180;",
    ]
    predicate = functions["stepwise::divergence::predicate_variable::branch_kernel"]["counts"]
    assert (predicate["bssy"], predicate["bsync"], predicate["bra"], predicate["predicated"]) == (2, 2, 3, 3)
    aligned = functions["stepwise::divergence::warp_aligned_branch::branch_kernel"]["counts"]
    assert aligned["mufu"] == {"MUFU.COS": 6, "MUFU.RCP": 1, "MUFU.SIN": 6}
    assert aligned["predicated"] == 6 and aligned["instructions"] == 70


@needs_cxxfilt
def test_template_arguments_stay_in_the_name():
    data = sass_report.report(LISTING.read_text(encoding="utf-8"), "x.o", "cuobjdump", "stepwise::occupancy::")
    [function] = data["functions"]
    assert function["name"] == "stepwise::occupancy::sum_matrix_2d::sum_matrix_kernel<32, 16>"
    assert function["counts"]["bra"] == 1 and function["counts"]["instructions"] == 31
    assert function["counts"]["mufu"] == {} and function["listing"] == ["/*01e0*/       BRA 0x1e0;"]


@pytest.mark.parametrize("line, parsed", [
    ("        /*0100*/               @P0 BRA 0x4120 ;       /* 0x0000004000047947 */",
     ("0100", "@P0", "BRA 0x4120 ;")),
    ("        /*0110*/              @!P0 BRA 0x4120 ;", ("0110", "@!P0", "BRA 0x4120 ;")),
    ("        /*0120*/             @!UP1 ULDC UR4, c[0x0][0x0] ;", ("0120", "@!UP1", "ULDC UR4, c[0x0][0x0] ;")),
    ("        /*0130*/               @PT NOP;", ("0130", "@PT", "NOP;")),
    ("        /*0008*/         { MOV R1, c[0x0][0x20] ; }  /* 0x4c98078000870001 */",
     ("0008", "", "MOV R1, c[0x0][0x20] ;")),
    ("                                          /* 0x000fea0003800000 */", None),
    ("\t.headerflags\t@\"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)\"", None),
])
def test_parse_instruction(line, parsed):
    assert sass_report.parse_instruction(line) == parsed


def test_tensor_core_instructions_are_counted_by_variant():
    instructions = [("0000", "", "HMMA.16816.F32.BF16 R4, R8, R12, R4 ;"),
                    ("0010", "", "HMMA.16816.F32.BF16 R16, R8, R14, R16 ;"),
                    ("0020", "", "HGMMA.64x256x16.F32.BF16 R24, gdesc[UR16], R24, gsb0 ;"),
                    ("0030", "", "WARPGROUP.ARRIVE ;"), ("0040", "", "FFMA R1, R2, R3, R1 ;")]
    counts = sass_report.count(instructions)
    assert counts["mma"] == {"HGMMA.64x256x16.F32.BF16": 1, "HMMA.16816.F32.BF16": 2}
    assert counts["instructions"] == 5 and counts["mufu"] == {}
    assert sass_report.short_listing(instructions) == []  # the listing keeps branches, barriers and MUFU


def test_counts_of_guards_warpsync_and_nop():
    instructions = [("0000", "", "WARPSYNC 0xffffffff ;"), ("0010", "@PT", "FADD R1, R1, R2 ;"),
                    ("0020", "@!UP0", "BRA.U 0x40 ;"), ("0030", "@P1", "MUFU.EX2 R3, R3 ;"),
                    ("0040", "", "NOP;"), ("0050", "@P0", "NOP;"), ("0060", "", "EXIT ;")]
    counts = sass_report.count(instructions)
    assert counts == {"instructions": 5, "bra": 1, "bssy": 0, "bsync": 0, "warpsync": 1, "exit": 1,
                      "predicated": 2, "mufu": {"MUFU.EX2": 1}, "mma": {}}
    assert sass_report.short_listing(instructions) == [
        "/*0000*/       WARPSYNC 0xffffffff ;", "/*0020*/ @!UP0 BRA.U 0x40 ;", "/*0030*/   @P1 MUFU.EX2 R3, R3 ;"]


def test_only_runs_of_more_than_three_are_shortened():
    three = [(f"{i:04x}", "", "MUFU.SIN R1, R1 ;") for i in range(3)]
    assert len(sass_report.short_listing(three)) == 3
    four = three + [("0003", "", "MUFU.SIN R2, R2 ;")]
    assert sass_report.short_listing(four) == ["/*0000*/       MUFU.SIN R1, R1 ;",
                                               "              ... (2 more MUFU.SIN)",
                                               "/*0003*/       MUFU.SIN R2, R2 ;"]
    mixed = four[:2] + [("0009", "", "MUFU.COS R1, R1 ;")] + four[2:]  # a COS breaks the run
    assert len(sass_report.short_listing(mixed)) == 5


@pytest.mark.parametrize("demangled, name", [
    ("stepwise::divergence::interleaved_branch::branch_kernel(float const*, float*, int)",
     "stepwise::divergence::interleaved_branch::branch_kernel"),
    ("void stepwise::occupancy::sum_matrix_2d::sum_matrix_kernel<32, 16>(float const*, float const*, float*, int, int)",
     "stepwise::occupancy::sum_matrix_2d::sum_matrix_kernel<32, 16>"),
    ("void a::k<a::Config<1, 2> >(a::Config<1, 2>)", "a::k<a::Config<1, 2> >"),
    ("a::(anonymous namespace)::k(int)", "a::(anonymous namespace)::k"),
    ("_Z1kPKfPfi", "_Z1kPKfPfi"),
])
def test_plain_name(demangled, name):
    assert sass_report.plain_name(demangled) == name


def test_relocatable_static_names_are_unprefixed():
    assert sass_report.unprefixed("__nv_static_42__abc_def_17__ZN1a1kEv") == "_ZN1a1kEv"
    assert sass_report.unprefixed(INTERLEAVED) == INTERLEAVED


@needs_cxxfilt
def test_a_function_two_objects_hold_is_kept_once_if_it_is_the_same_code():
    text = LISTING.read_text(encoding="utf-8")
    twice = sass_report.report(text + text, "bench", "cuobjdump", "stepwise::divergence::")
    assert len(twice["functions"]) == 3
    other = text.replace("MUFU.SIN R17, R4 ;", "MUFU.SIN R18, R4 ;")
    with pytest.raises(sass_report.ReportError, match="branch_kernel for sm_90 twice, compiled differently"):
        sass_report.report(text + other, "bench", "cuobjdump", "stepwise::divergence::")


# -- the script end to end, with a fake cuobjdump --------------------------------------------

def fake_cuobjdump(tmp_path: Path, listing: str | None = None, status: int = 0,
                   stderr: str = "") -> Path:
    """An executable that answers --version and prints ``listing`` for -sass (or fails)."""
    data = tmp_path / "fake-listing.txt"
    data.write_text(listing if listing is not None else LISTING.read_text(encoding="utf-8"), encoding="utf-8")
    tool = tmp_path / "cuobjdump"
    tool.write_text(f"""#!{PY}
import sys
if sys.argv[1:] == ["--version"]:
    sys.stdout.write({VERSION!r})
    sys.exit(0)
assert sys.argv[1] == "-sass" and len(sys.argv) == 3, sys.argv
sys.stderr.write({stderr!r})
if {status}:
    sys.exit({status})
sys.stdout.write(open({str(data)!r}, encoding="utf-8").read())
""", encoding="utf-8")
    tool.chmod(0o755)
    return tool


def run_script(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([PY, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=60)


def script_args(tool: Path, obj: Path, out: Path, *extra: str) -> list[str]:
    return ["--cuobjdump", str(tool), "--object", str(obj), "--out", str(out), *extra]


@pytest.fixture
def obj(tmp_path) -> Path:
    path = tmp_path / "divergence_steps.cu.o"
    path.write_bytes(b"FIXTURE: not an object; the fake cuobjdump does not read it")
    return path


def assert_one_line(proc, status: int, *needles: str):
    assert proc.returncode == status, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("sass_report.py: ")
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert "Traceback" not in proc.stderr


@needs_cxxfilt
def test_script_writes_the_report(tmp_path, obj):
    out = tmp_path / "sass" / "divergence.json"
    proc = run_script(*script_args(fake_cuobjdump(tmp_path), obj, out, "--namespace", "stepwise::divergence::"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    data = json.loads(out.read_text(encoding="utf-8"))
    assert list(data) == ["tool", "arch", "object", "functions"]
    assert data["tool"] == "cuobjdump 13.0.85" and data["arch"] == "sm_90"
    assert data["object"] == "divergence_steps.cu.o"
    assert [f["name"].split("::")[2] for f in data["functions"]] == [
        "interleaved_branch", "predicate_variable", "warp_aligned_branch"]
    assert list(data["functions"][0]) == ["mangled", "name", "arch", "counts", "listing"]
    assert [p.name for p in out.parent.iterdir()] == ["divergence.json"]  # no .partial left
    # the docs read it
    report = sass.load(out)
    assert report.functions[0].counts["mufu"] == {"MUFU.COS": 6, "MUFU.SIN": 6}


@needs_cxxfilt
def test_script_without_namespace_keeps_every_function(tmp_path, obj):
    out = tmp_path / "all.json"
    assert run_script(*script_args(fake_cuobjdump(tmp_path), obj, out)).returncode == 0
    assert len(json.loads(out.read_text())["functions"]) == 4


@needs_cxxfilt
def test_script_writes_a_report_per_chapter_the_registry_asks_for(tmp_path, obj):
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps({"chapters": [{"id": "divergence", "sass": True}, {"id": "transpose",
                                                                                     "sass": False}]}))
    out_dir = tmp_path / "sass"
    write_report(out_dir / "retired.json", "{}")  # a chapter that no longer asks: removed
    proc = run_script("--cuobjdump", str(fake_cuobjdump(tmp_path)), "--object", str(obj), "--registry",
                      str(registry), "--out-dir", str(out_dir))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out_dir.iterdir()) == ["chapters.txt", "divergence.json"]
    assert (out_dir / "chapters.txt").read_text() == "divergence\n"
    assert len(sass.load(out_dir / "divergence.json").functions) == 3


def test_cuobjdump_fails(tmp_path, obj):
    out = tmp_path / "divergence.json"
    out.write_text("{}")  # an old report must not stay behind
    tool = fake_cuobjdump(tmp_path, status=1, stderr="cuobjdump fatal   : Could not open input file 'x'\n")
    proc = run_script(*script_args(tool, obj, out, "--namespace", "stepwise::divergence::"))
    assert_one_line(proc, 1, "cuobjdump -sass failed (exit 1)", obj.name, "Could not open input file")
    assert not out.exists()


def test_no_device_code(tmp_path, obj):
    tool = fake_cuobjdump(tmp_path, listing="")
    proc = run_script(*script_args(tool, obj, tmp_path / "x.json"))
    assert_one_line(proc, 1, "listed no function", obj.name)
    assert not (tmp_path / "x.json").exists()


@needs_cxxfilt
def test_no_function_in_the_namespace(tmp_path, obj):
    proc = run_script(*script_args(fake_cuobjdump(tmp_path), obj, tmp_path / "x.json",
                                   "--namespace", "stepwise::transpose::"))
    assert_one_line(proc, 1, "no function of divergence_steps.cu.o is in namespace 'stepwise::transpose::'",
                    "4 functions")
    assert not (tmp_path / "x.json").exists()


def test_without_cxxfilt_names_stay_mangled(tmp_path, obj):
    bare = tmp_path / "bin"
    bare.mkdir()
    env = dict(os.environ, PATH=str(bare))  # no c++filt; the fake tool and Python by absolute path
    tool = fake_cuobjdump(tmp_path)
    proc = run_script(*script_args(tool, obj, tmp_path / "x.json", "--namespace", "stepwise::"), env=env)
    assert_one_line(proc, 1, "c++filt not found")
    out = tmp_path / "all.json"
    assert run_script(*script_args(tool, obj, out), env=env).returncode == 0
    names = [f["name"] for f in json.loads(out.read_text())["functions"]]
    assert INTERLEAVED in names and all(name.startswith("_Z") for name in names)


def test_missing_object_and_missing_tool(tmp_path, obj):
    proc = run_script(*script_args(fake_cuobjdump(tmp_path), tmp_path / "nope.o", tmp_path / "x.json"))
    assert_one_line(proc, 1, "no object file", "nope.o")
    proc = run_script(*script_args(tmp_path / "no-cuobjdump", obj, tmp_path / "x.json"))
    assert_one_line(proc, 1, "cannot run cuobjdump", "no-cuobjdump")


@pytest.mark.parametrize("args, needle", [
    (["--cuobjdump", "x", "--object", "y"], "--out"),
    (["--cuobjdump", "x", "--object", "y", "--registry", "r.json"], "--out-dir"),
    (["--cuobjdump", "x", "--object", "y", "--out", "z", "--registry", "r.json", "--out-dir", "d"], "either"),
    (["--cuobjdump", "x", "--object", "y", "--out", "z", "--colour"], "--colour"),
    ([], "required"),
])
def test_usage_errors(args, needle):
    proc = run_script(*args)
    assert_one_line(proc, 2, needle, "usage: sass_report.py --cuobjdump PATH")


def test_help():
    proc = run_script("--help")
    assert proc.returncode == 0
    for option in ("--cuobjdump", "--object", "--out", "--namespace"):
        assert option in proc.stdout


def test_script_is_stdlib_only():
    imports = set(re.findall(r"^(?:from|import) (\w+)", SCRIPT.read_text(encoding="utf-8"), re.MULTILINE))
    assert imports <= {"__future__", "argparse", "json", "os", "re", "shutil", "subprocess", "sys", "pathlib"}


# -- reading the report (stepwise_docs.sass) -------------------------------------------------

def function_entry(name: str, **counts) -> dict:
    base = {"instructions": 100, "bra": 3, "bssy": 1, "bsync": 1, "warpsync": 0, "exit": 2,
            "predicated": 2, "mufu": {"MUFU.SIN": 256, "MUFU.COS": 256}}
    return {"mangled": "_Z" + name.replace("::", "_"), "name": name, "arch": "sm_90",
            "counts": {**base, **counts}, "listing": ["/*00d0*/       BSSY B0, 0x8130 ;"]}


def report_data(*functions: dict) -> dict:
    return {"tool": "cuobjdump 13.0.85 (FIXTURE)", "arch": "sm_90", "object": "fixture.o",
            "functions": list(functions)}


def write_report(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_load_a_report(tmp_path):
    path = write_report(tmp_path / "demo.json", report_data(function_entry("stepwise::demo::naive::scale_kernel")))
    report = sass.load(path)
    assert report.tool == "cuobjdump 13.0.85 (FIXTURE)" and report.arch == "sm_90"
    [function] = report.functions
    assert function.scope == ["stepwise", "demo", "naive"] and function.unqualified == "scale_kernel"
    assert function.counts["bra"] == 3 and function.listing == ["/*00d0*/       BSSY B0, 0x8130 ;"]


@pytest.mark.parametrize("data, needles", [
    (None, ["does not exist", "cmake --build build", "stepwise_docs/sass_report.py"]),
    ("{ not json", ["is not valid JSON", "line 1"]),
    ("[]", ["is not a JSON object"]),
    ({"tool": "t", "arch": "sm_90", "object": "o"}, ["has no 'functions'"]),
    (report_data(), ["'functions' is not a non-empty list"]),
    ({**report_data(function_entry("a::k")), "tool": ""}, ["'tool' is not a non-empty string"]),
    (report_data({k: v for k, v in function_entry("a::k").items() if k != "listing"}),
     ["functions[0] has no 'listing'"]),
    (report_data({**function_entry("a::k"), "counts": {"instructions": 1}}), ["'counts' has no 'bra'"]),
    (report_data(function_entry("a::k", bra=-1)), ["counts.bra is not a count"]),
    (report_data(function_entry("a::k", bra="3")), ["counts.bra is not a count"]),
    (report_data(function_entry("a::k", mufu={"MUFU.SIN": "x"})), ["counts.mufu"]),
    (report_data(function_entry("a::k", mma={"HGMMA.64x256x16.F32.BF16": -1})), ["counts.mma"]),
    (report_data({**function_entry("a::k"), "listing": [1]}), ["'listing' is not a list of strings"]),
])
def test_load_errors_name_the_file(tmp_path, data, needles):
    path = tmp_path / "chapter.json"
    if data is not None:
        write_report(path, data)
    with pytest.raises(DataError) as exc:
        sass.load(path)
    synth.assert_one_line_message(exc, "SASS report", "chapter.json", *needles)


def test_tensor_core_counts_load_and_may_be_absent(tmp_path):
    with_mma = function_entry("a::b::k", mma={"HGMMA.64x256x16.F32.BF16": 4})
    report = sass.load(write_report(tmp_path / "tc.json", report_data(with_mma)))
    assert report.functions[0].counts["mma"] == {"HGMMA.64x256x16.F32.BF16": 4}
    older = sass.load(write_report(tmp_path / "old.json", report_data(function_entry("a::b::k"))))
    assert older.functions[0].counts["mma"] == {}  # reports made before mma was counted


def test_functions_are_matched_by_namespace_and_kernel_name(tmp_path):
    steps = [synth.step_entry(f"0{i + 1}_block_{x}x{y}", "stepwise::occupancy::sum_matrix_2d",
                        [(f"sum_matrix_kernel<{x}, {y}>", [x, y, 1])],
                        "snippets/occupancy/01_sum_matrix_2d.cuh", f"sum_matrix<{x}, {y}>")
             for i, (x, y) in enumerate([(32, 32), (32, 16)])]
    steps.append(synth.step_entry("03_other", "stepwise::occupancy::other", [("k<int>", [256, 1, 1])]))
    chapter = Dataset(synth.registry_for(steps, "occupancy"), None, tmp_path).chapter("occupancy")
    path = write_report(tmp_path / "occupancy.json", report_data(
        function_entry("stepwise::occupancy::sum_matrix_2d::sum_matrix_kernel<32, 16>", instructions=31),
        function_entry("stepwise::occupancy::sum_matrix_2d::sum_matrix_kernel<32,32>", instructions=33),
        function_entry("stepwise::occupancy::(anonymous namespace)::other::k<int>", instructions=7),
        {**function_entry("stepwise::occupancy::other::k<int>", instructions=8), "arch": "sm_80"}))
    report = sass.load(path)
    found = {s["id"]: [(k["name"], f.counts["instructions"]) for k, f in sass.step_functions(report, chapter, s)]
             for s in chapter.steps}
    assert found == {"01_block_32x32": [("sum_matrix_kernel<32, 32>", 33)],  # spaces do not count
                     "02_block_32x16": [("sum_matrix_kernel<32, 16>", 31)],
                     "03_other": [("k<int>", 7)]}
    # the measuring GPU's architecture first
    [(_k, function)] = sass.step_functions(report, chapter, chapter.step("03_other"), "sm_80")
    assert function.counts["instructions"] == 8


def test_a_kernel_without_a_function_is_an_error(tmp_path):
    steps = [synth.step_entry("01_a", "stepwise::x::a", [("k", [256, 1, 1]), ("other_kernel", [32, 1, 1])])]
    chapter = Dataset(synth.registry_for(steps, "x"), None, tmp_path).chapter("x")
    path = write_report(tmp_path / "x.json", report_data(function_entry("stepwise::x::a::k"),
                                                         function_entry("stepwise::y::a::other_kernel")))
    with pytest.raises(sass.SassError) as exc:
        sass.step_functions(sass.load(path), chapter, chapter.step("01_a"))
    message = str(exc.value)
    assert "x.json" in message and "no function stepwise::x::a::other_kernel" in message
    assert "step x/01_a" in message and "cmake --build build" in message


# -- a step that shares the previous step's source -------------------------------------------

def test_same_source_paragraph():
    prev = {"id": "01_block_32x32", "file": "snippets/occupancy/01_sum_matrix_2d.cuh"}
    step = {"id": "02_block_32x16", "file": "snippets/occupancy/01_sum_matrix_2d.cuh",
            "launcher": "sum_matrix<32, 16>", "kernels": [{"name": "k", "block": [32, 16, 1]}]}
    parts = same_source_parts(prev, step)
    assert "".join(text for _kind, text in parts) == (
        "Same source as 01_block_32x32 (snippets/occupancy/01_sum_matrix_2d.cuh); this step launches "
        "sum_matrix<32, 16> with blocks of 32 \u00d7 16 threads.")
    assert ("step", "01_block_32x32") in parts and ("code", "sum_matrix<32, 16>") in parts
    step["kernels"] = [{"name": "k", "block": [256, 1, 1]}]
    assert "with blocks of 256 threads." in "".join(t for _k, t in same_source_parts(prev, step))


# -- the directive and shared sources, built (FIXTURE project) -------------------------------

SHAPES_PAGE = """---
orphan: true
---

# FIXTURE block shapes of one source

```{stepwise-sass} shapes
:listing:
```

## Blocks of 256

```{stepwise-step} shapes 01_block_256
:no-api:
```

## Blocks of 128 x 2

```{stepwise-step} shapes 02_block_128x2
:no-api:
```
"""


def shapes_project(project: Path, with_report: bool = True) -> None:
    """Add a chapter of two steps that launch one source with two block shapes, its page and
    (FIXTURE) SASS report in the default place, the registry's folder + /sass."""
    reg = synth.fixture_registry()
    steps = [synth.step_entry(step_id, "stepwise::demo::vector", [("scale_kernel", block)],
                        "snippets/demo/02_vector.cuh", "update")
             for step_id, block in (("01_block_256", [256, 1, 1]), ("02_block_128x2", [128, 2, 1]))]
    reg["chapters"] += synth.registry_for(steps, "shapes")["chapters"]
    synth.write_json(project / "registry.json", reg)
    synth.write_json(project / "measurements" / "fixture-gpu.json", synth.measurement_for(reg, project))
    (project / "docs" / "shapes.md").write_text(SHAPES_PAGE, encoding="utf-8")
    if with_report:
        write_report(project / "sass" / "shapes.json", report_data(
            function_entry("stepwise::demo::vector::scale_kernel", instructions=1234, predicated=5,
                           mufu={"MUFU.SIN": 7, "MUFU.RCP": 1})))


def build(project: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    args = ["--root", str(project), "--build-dir", str(project / "build"),
            "--registry", str(project / "registry.json"), "--measurements", str(project / "measurements"),
            "--strict"]
    return subprocess.run([PY, str(synth.BUILD_DOCS), *args], capture_output=True, text=True,
                          env=env, timeout=300)


@needs_doxygen
def test_sass_table_listing_and_shared_source_build(project):
    shapes_project(project)
    env = {k: v for k, v in os.environ.items() if k != "STEPWISE_SASS_DIR"}
    proc = build(project, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html, text = synth.built_page(project, "shapes.html")
    assert html.count('class="stepwise-data stepwise-sass') == 1
    assert ("SASS instructions of each step\u2019s kernels, compiled by FIXTURE nvcc for sm_90, read with "
            "cuobjdump -sass at build time (cuobjdump 13.0.85 (FIXTURE), fixture.o)") in text
    assert "step kernel instructions BRA BSSY / BSYNC predicated MUFU.RCP MUFU.SIN" in text
    assert text.count("scale_kernel 1,234 3 1 / 1 5 1 7") == 2  # both steps: one source
    assert "WARPSYNC" not in text
    assert html.count("stepwise-sass-listing highlight-text") == 2 and "BSSY B0, 0x8130 ;" in text
    assert "01_block_256: stepwise::demo::vector::scale_kernel (sm_90)" in text
    # the first step shows the source; the second one paragraph, linked to the first
    assert text.count("The whole step, ready to copy") == 1
    assert "What changed since" not in text
    assert ("Same source as 01_block_256 ( snippets/demo/02_vector.cuh ); this step launches update "
            "with blocks of 128 \u00d7 2 threads.") in text
    assert re.search(r'stepwise-same-source.*?href="#blocks-of-256"', html, re.S)


@needs_doxygen
def test_a_missing_sass_report_fails_naming_file_and_how_to_make_it(project, tmp_path):
    shapes_project(project)
    elsewhere = tmp_path / "elsewhere"
    proc = build(project, dict(os.environ, STEPWISE_SASS_DIR=str(elsewhere)))
    assert proc.returncode != 0
    assert "stepwise-sass" in proc.stderr and "SASS report" in proc.stderr
    assert "elsewhere/shapes.json does not exist" in proc.stderr
    assert "cmake --build build where the chapter's registry entry sets sass; see " \
           "docs/_ext/stepwise_docs/sass_report.py" in proc.stderr


@needs_doxygen
def test_a_step_without_a_function_fails(project):
    shapes_project(project)
    write_report(project / "sass" / "shapes.json",
                 report_data(function_entry("stepwise::demo::naive::scale_kernel")))
    env = {k: v for k, v in os.environ.items() if k != "STEPWISE_SASS_DIR"}
    proc = build(project, env)
    assert proc.returncode != 0
    assert "shapes.json has no function stepwise::demo::vector::scale_kernel" in proc.stderr
    assert "step shapes/01_block_256" in proc.stderr
