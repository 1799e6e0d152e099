# -*- Python -*- lit configuration for the mdplan test suite.
import os
import shutil
import subprocess

import lit.formats

config.name = "mdplan"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".test", ".mdg"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py",
                   "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.mdplan_obj_root, "test")

# Tools: the project's first, then LLVM's FileCheck, not, split-file.
path = os.pathsep.join([config.mdplan_tools_dir, config.llvm_tools_dir,
                        config.environment.get("PATH", os.environ["PATH"])])
config.environment["PATH"] = path
# lit passes ASan's, UBSan's and LSan's options on; TSan's and the OpenMP
# tool Archer's too (scripts/sanitize.sh thread).
for var in ["TSAN_OPTIONS", "OMP_TOOL_LIBRARIES"]:
    if os.environ.get(var):
        config.environment[var] = os.environ[var]
# Short OpenMP spins, so that mdrun's two-thread runs stay quick on a CI
# machine whose cores other jobs share (docs/UserGuide.md, "Intra-op
# threads and a busy machine"); the caller's own settings win.
for var in ["OMP_WAIT_POLICY", "GOMP_SPINCOUNT"]:
    if os.environ.get(var):
        config.environment[var] = os.environ[var]
if not any(v in config.environment for v in ["OMP_WAIT_POLICY", "GOMP_SPINCOUNT"]):
    config.environment["GOMP_SPINCOUNT"] = "10000"

config.substitutions.append(("%examples",
                             os.path.join(config.mdplan_src_root, "examples")))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%docs",
                             os.path.join(config.mdplan_src_root, "docs")))
config.substitutions.append(("%mdplan_obj_root", config.mdplan_obj_root))
# A project that links mdplan's libraries builds with the same compilers
# (a Clang build's OpenMP and sanitizer runtimes are not GCC's).
config.substitutions.append(("%consumer_compilers",
    "-DCMAKE_C_COMPILER='%s' -DCMAKE_CXX_COMPILER='%s'" % (
        config.c_compiler, config.cxx_compiler)))
config.substitutions.append(("%S_inputs",
                             os.path.join(config.test_source_root, "Inputs")))

# flatc (a build without it uses a pregenerated schema header): plans
# rewritten through JSON (Plan/Inputs/edit_plan.py).
if config.flatc and os.path.isfile(config.flatc):
    config.available_features.add("flatc")
    config.substitutions.append(("%edit_plan", "'%s' '%s' '--flatc=%s' '--schema=%s'" % (
        config.python_executable,
        os.path.join(config.test_source_root, "Plan", "Inputs", "edit_plan.py"),
        config.flatc, os.path.join(config.mdplan_src_root, "schema",
                                   "plan.fbs"))))

# The fuzz targets linked with libFuzzer (MDPLAN_BUILD_FUZZERS) fuzz a
# directory they are given instead of replaying it: test/Fuzz needs the
# standalone driver.
if config.libfuzzer:
    config.available_features.add("libfuzzer")

# Optional features for REQUIRES: lines.
if config.have_cuda:
    config.available_features.add("cuda-build")
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                             timeout=20)
        if out.returncode == 0 and b"GPU" in out.stdout:
            config.available_features.add("cuda")
            if shutil.which("compute-sanitizer") or os.path.exists(
                    "/usr/local/cuda/bin/compute-sanitizer"):
                config.available_features.add("compute-sanitizer")
    except (OSError, subprocess.SubprocessError):
        pass
if config.have_mpi:
    config.available_features.add("mpi-build")
if config.have_mpi and shutil.which("mpirun"):
    # Open MPI refuses root without these; more ranks than cores is fine
    # for tests; no single-copy shared memory (ptrace is often forbidden in
    # containers).
    for var, value in [("OMPI_ALLOW_RUN_AS_ROOT", "1"),
                       ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
                       ("OMPI_MCA_rmaps_base_oversubscribe", "1"),
                       ("OMPI_MCA_btl_vader_single_copy_mechanism", "none")]:
        config.environment[var] = value
    for var in ["HOME", "TMPDIR", "USER"]:
        if var in os.environ:
            config.environment[var] = os.environ[var]
    # Under LeakSanitizer, Open MPI's own allocations outlive MPI_Finalize
    # (in plugins it unloaded, so no suppression can name them): the
    # processes mpirun starts skip the leak check, the rest keep it.
    asan = config.environment.get("ASAN_OPTIONS")
    if asan:
        config.substitutions.append(
            ("%mpirun", "env 'ASAN_OPTIONS=%s:detect_leaks=0' mpirun" % asan))
    else:
        config.substitutions.append(("%mpirun", "mpirun"))
    # The tests need a launcher that can start two processes here.
    try:
        probe = subprocess.run(["mpirun", "-n", "2", "true"],
                               capture_output=True, timeout=60,
                               env=dict(os.environ, **config.environment))
        if probe.returncode == 0:
            config.available_features.add("mpi")
        else:
            lit_config.warning("mpirun cannot start two processes here; "
                               "the MPI tests are skipped: " +
                               probe.stderr.decode(errors="replace")[-300:])
    except (OSError, subprocess.SubprocessError) as e:
        lit_config.warning("mpirun failed (%s); the MPI tests are skipped" % e)
# A device that refuses every write (ENOSPC): the output-error tests.
if os.path.exists("/dev/full"):
    config.available_features.add("dev-full")
if os.path.isdir("/usr/share/datasets/fashion-mnist"):
    config.available_features.add("fashion-mnist")
# A Python with NumPy (Debian's python3-numpy, which scripts/setup.sh
# installs, is /usr/bin/python3's): the independent NumPy implementation
# of the example models (mdrun/numpy-reference.test).
for py in [config.python_executable, shutil.which("python3"),
           "/usr/bin/python3"]:
    try:
        # What the reference needs (NumPy 1.20 or later).
        if py and subprocess.run(
                [py, "-c",
                 "from numpy.lib.stride_tricks import sliding_window_view"],
                capture_output=True, timeout=60).returncode == 0:
            config.available_features.add("numpy")
            config.substitutions.append(("%numpy_python", py))
            break
    except (OSError, subprocess.SubprocessError):
        pass
try:
    if subprocess.run(["/usr/bin/python3", "-c", "import torch"],
                      capture_output=True, timeout=60).returncode == 0:
        config.available_features.add("torch")
except (OSError, subprocess.SubprocessError):
    pass
