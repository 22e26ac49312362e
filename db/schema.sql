-- kplan database schema, version 7 (v2 added kp_launch_attrs, v3 to v5 the
-- columns marked "v3", "v5"; v4's are in kp_runs; v6 kp_collectives; v7
-- kp_cpu_op_args and the columns marked "v7"). Every statement is idempotent, so each migration
-- runs this file again (db/db.c): a v1 database opened for writing gains
-- the new tables. CREATE TABLE IF NOT EXISTS cannot add a column to an
-- existing table: columns added later are also listed in db/db.c
-- (added_columns), which adds the missing ones; they need a default (or
-- allow NULL) so that older rows read well.
--
-- Trace tables reuse the Nsight Systems SQLite export's names and columns, so
-- that queries written for an nsys export run on a kplan database. Each trace
-- table has one extra trailing column, runId, naming the row of kp_runs the
-- record belongs to (an nsys export imported into kplan becomes one run).
-- All times are integer nanoseconds; names are interned in StringIds.
-- Indexes are created by kp_db_create_indexes() after bulk loads.

CREATE TABLE IF NOT EXISTS StringIds (
	id INTEGER PRIMARY KEY,
	value TEXT NOT NULL
);

-- One row per GPU kernel execution (CUPTI CONCURRENT_KERNEL records).
CREATE TABLE IF NOT EXISTS CUPTI_ACTIVITY_KIND_KERNEL (
	start INTEGER NOT NULL,
	end INTEGER NOT NULL,
	deviceId INTEGER NOT NULL,
	contextId INTEGER NOT NULL DEFAULT 0,
	streamId INTEGER NOT NULL,
	correlationId INTEGER,
	globalPid INTEGER,
	demangledName INTEGER NOT NULL,  -- StringIds.id
	shortName INTEGER NOT NULL,      -- StringIds.id
	mangledName INTEGER,             -- StringIds.id
	launchType INTEGER,              -- 0 regular, 1 cooperative single, 2 cooperative multi, 3 cbl
	cacheConfig INTEGER,
	registersPerThread INTEGER NOT NULL DEFAULT 0,
	gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
	blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL,
	staticSharedMemory INTEGER NOT NULL DEFAULT 0,
	dynamicSharedMemory INTEGER NOT NULL DEFAULT 0,
	localMemoryPerThread INTEGER,
	localMemoryTotal INTEGER,
	gridId INTEGER,
	sharedMemoryExecuted INTEGER,
	graphNodeId INTEGER,             -- non-zero when launched from a CUDA graph
	graphId INTEGER,
	runId INTEGER NOT NULL DEFAULT 1
);

-- CUDA runtime and driver API calls (only the calls that matter).
-- eventClass: 0 runtime API, 1 driver API (kplan's convention).
CREATE TABLE IF NOT EXISTS CUPTI_ACTIVITY_KIND_RUNTIME (
	start INTEGER NOT NULL,
	end INTEGER NOT NULL,
	eventClass INTEGER NOT NULL DEFAULT 0,
	globalTid INTEGER,               -- (pid << 24) | tid, as nsys serializes it
	correlationId INTEGER,
	nameId INTEGER NOT NULL,         -- StringIds.id, e.g. cudaLaunchKernel
	returnValue INTEGER NOT NULL DEFAULT 0,
	callchainId INTEGER,
	runId INTEGER NOT NULL DEFAULT 1
);

-- copyKind: CUpti_ActivityMemcpyKind (1 HtoD, 2 DtoH, 8 DtoD, 10 PtoP, ...)
-- srcKind/dstKind: CUpti_ActivityMemoryKind (1 pageable, 2 pinned, 3 device, ...)
CREATE TABLE IF NOT EXISTS CUPTI_ACTIVITY_KIND_MEMCPY (
	start INTEGER NOT NULL,
	end INTEGER NOT NULL,
	deviceId INTEGER NOT NULL,
	contextId INTEGER NOT NULL DEFAULT 0,
	streamId INTEGER NOT NULL,
	correlationId INTEGER,
	globalPid INTEGER,
	bytes INTEGER NOT NULL,
	copyKind INTEGER NOT NULL,
	srcKind INTEGER,
	dstKind INTEGER,
	srcDeviceId INTEGER,
	dstDeviceId INTEGER,
	graphNodeId INTEGER,
	runId INTEGER NOT NULL DEFAULT 1
);

CREATE TABLE IF NOT EXISTS CUPTI_ACTIVITY_KIND_MEMSET (
	start INTEGER NOT NULL,
	end INTEGER NOT NULL,
	deviceId INTEGER NOT NULL,
	contextId INTEGER NOT NULL DEFAULT 0,
	streamId INTEGER NOT NULL,
	correlationId INTEGER,
	globalPid INTEGER,
	value INTEGER NOT NULL DEFAULT 0,
	bytes INTEGER NOT NULL,
	graphNodeId INTEGER,
	memKind INTEGER,
	runId INTEGER NOT NULL DEFAULT 1
);

-- syncType: CUpti_ActivitySynchronizationType (1 event sync, 2 stream wait
-- event, 3 stream sync, 4 context sync)
CREATE TABLE IF NOT EXISTS CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (
	start INTEGER NOT NULL,
	end INTEGER NOT NULL,
	deviceId INTEGER NOT NULL DEFAULT 0,
	contextId INTEGER NOT NULL DEFAULT 0,
	streamId INTEGER,
	correlationId INTEGER,
	globalPid INTEGER,
	syncType INTEGER NOT NULL,
	eventId INTEGER,
	runId INTEGER NOT NULL DEFAULT 1
);

-- NVTX ranges and marks. eventType as nsys: 34 mark, 59 push/pop range,
-- 60 start/end range, 75 domain create. end is NULL for marks.
-- Profiler annotations from imported traces are stored as push/pop ranges.
CREATE TABLE IF NOT EXISTS NVTX_EVENTS (
	start INTEGER NOT NULL,
	end INTEGER,
	eventType INTEGER NOT NULL,
	rangeId INTEGER,
	category INTEGER,
	color INTEGER,
	text TEXT,
	globalTid INTEGER,
	endGlobalTid INTEGER,
	textId INTEGER,                  -- StringIds.id when text is interned
	domainId INTEGER,
	runId INTEGER NOT NULL DEFAULT 1
);

-- CUPTI / collector overhead intervals.
CREATE TABLE IF NOT EXISTS PROFILER_OVERHEAD (
	start INTEGER NOT NULL,
	end INTEGER NOT NULL,
	globalTid INTEGER,
	nameId INTEGER,
	runId INTEGER NOT NULL DEFAULT 1
);

CREATE TABLE IF NOT EXISTS TARGET_INFO_GPU (
	id INTEGER NOT NULL,             -- device ordinal
	name TEXT NOT NULL,
	busLocation TEXT,
	totalMemory INTEGER,
	smCount INTEGER,
	computeMajor INTEGER,
	computeMinor INTEGER,
	clockRate INTEGER,               -- kHz
	memoryBandwidth INTEGER,         -- bytes/s
	l2CacheSize INTEGER,
	maxThreadsPerBlock INTEGER,
	maxRegistersPerSm INTEGER,
	maxShmemPerBlock INTEGER,
	maxShmemPerSm INTEGER,
	threadsPerWarp INTEGER,
	uuid TEXT,
	runId INTEGER NOT NULL DEFAULT 1
);

-- ---------------------------------------------------------------------------
-- kplan's own tables.

-- One row per recording or import. source: record | chrome | nsys | synthetic.
CREATE TABLE IF NOT EXISTS kp_runs (
	runId INTEGER PRIMARY KEY,
	created_ns INTEGER NOT NULL,
	source TEXT NOT NULL,
	source_path TEXT,
	command TEXT,
	host TEXT,
	pid INTEGER,
	device_name TEXT,
	compute_major INTEGER,
	compute_minor INTEGER,
	sm_count INTEGER,
	driver_version INTEGER,
	runtime_version INTEGER,
	cupti_version INTEGER,
	kplan_version TEXT,
	t_begin_ns INTEGER,              -- first and last record time
	t_end_ns INTEGER,
	dropped_records INTEGER NOT NULL DEFAULT 0,
	dropped_detail TEXT,             -- what was dropped and why
	overhead_ns INTEGER,             -- collector time, when known
	status TEXT NOT NULL DEFAULT 'complete',  -- complete | partial | failed
	note TEXT,
	rank INTEGER,                    -- a rank of a multi-process job (torchrun, mpirun,
	local_rank INTEGER,              -- Slurm: collector/rank.h), else NULL; local rank
	world_size INTEGER,              -- and ranks in the job, NULL when not said
	clock_base_ns INTEGER            -- added to the run's times to put them on a clock the
	                                 -- job's ranks share (an imported trace's
	                                 -- baseTimeNanoseconds); NULL: already shared. Schema v6
);

-- Per launch argument, recorded with `kplan record --args`.
-- value holds the parameter's bytes as an integer when size <= 8.
CREATE TABLE IF NOT EXISTS kp_launch_args (
	runId INTEGER NOT NULL,
	correlationId INTEGER NOT NULL,
	argIndex INTEGER NOT NULL,
	size INTEGER NOT NULL,
	value INTEGER,
	PRIMARY KEY (runId, correlationId, argIndex)
) WITHOUT ROWID;

-- Launch attributes, recorded by `kplan record` from the launch calls that
-- take them (cudaLaunchKernelEx, cuLaunchKernelEx): one row per launch with
-- programmatic dependent launch (programmatic stream serialization or a
-- programmatic event), which the analyzer's graph model uses. Schema v2.
CREATE TABLE IF NOT EXISTS kp_launch_attrs (
	runId INTEGER NOT NULL,
	correlationId INTEGER NOT NULL,
	pdl INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (runId, correlationId)
) WITHOUT ROWID;

-- What a collective kernel moved and on which communicator, where the trace
-- says (PyTorch's record_param_comms metadata, on the kernel's event or on
-- the CPU op that launched it): one row per NCCL kernel, keyed as the kernel
-- row is (runId, streamId, start). bytes: the larger of the input and output
-- buffers, nelems times the dtype's size; NULL when the dtype is unknown.
-- Schema v6.
CREATE TABLE IF NOT EXISTS kp_collectives (
	runId INTEGER NOT NULL,
	streamId INTEGER NOT NULL,
	start INTEGER NOT NULL,
	name TEXT,                       -- "allreduce", "allgather_into_tensor_coalesced", ...
	dtype TEXT,                      -- PyTorch's spelling: Float, BFloat16, ...
	in_nelems INTEGER,
	out_nelems INTEGER,
	bytes INTEGER,
	pg_name TEXT,                    -- the process group (communicator): "0", "1", ...
	pg_desc TEXT,                    -- "default_pg", "undefined", ...
	group_size INTEGER,
	group_ranks TEXT,                -- "[0, 1]"
	seq INTEGER,                     -- the process group's sequence number, where said
	PRIMARY KEY (runId, streamId, start)
) WITHOUT ROWID;

-- The inputs of a PyTorch CPU op, where the trace says (a profiler trace
-- recorded with record_shapes=True: the cpu_op event's args "Input Dims",
-- "Input type", "Input Strides", "Concrete Inputs"), keyed as the op's
-- NVTX_EVENTS row is (runId, globalTid, start; domain pytorch.cpu_op). Each
-- is the JSON array as the trace wrote it, re-serialized without spaces and
-- at most 4096 bytes; NULL when the event lacked it. Schema v7.
CREATE TABLE IF NOT EXISTS kp_cpu_op_args (
	runId INTEGER NOT NULL,
	globalTid INTEGER NOT NULL,
	start INTEGER NOT NULL,
	dims TEXT,                       -- [[1,1,3072],[]]
	types TEXT,                      -- ["c10::Half","Scalar"]
	strides TEXT,                    -- [[3072,3072,1],[]]
	concrete TEXT,                   -- ["","0.5"]
	PRIMARY KEY (runId, globalTid, start)
) WITHOUT ROWID;

-- Cost-model constants measured by `kplan calibrate`, per GPU and driver.
CREATE TABLE IF NOT EXISTS kp_calibration (
	gpu_name TEXT NOT NULL,
	driver_version INTEGER NOT NULL,
	quantity TEXT NOT NULL,          -- analyzer/cost.h kp_cost_name(): launch_host_ns, graph_node_ns, ...
	value_ns REAL NOT NULL,          -- ns (bytes for *_bytes, bytes/ns for *_bytes_per_ns)
	n_samples INTEGER,
	created_ns INTEGER NOT NULL,
	PRIMARY KEY (gpu_name, driver_version, quantity)
);

-- Regions found by the analyzer (per run). Times are per occurrence
-- (medians over occurrences). Written by `kplan analyze`, which replaces a
-- run's rows of kp_regions, kp_region_occurrences, kp_blockers, kp_gaps and
-- kp_fusion_candidates in one transaction.
CREATE TABLE IF NOT EXISTS kp_regions (
	runId INTEGER NOT NULL,
	regionId INTEGER NOT NULL,
	parentId INTEGER,                -- set on the parts of a split region
	label TEXT NOT NULL,
	source TEXT NOT NULL,            -- nvtx | mined | split | runtime | graph (the program's own cudaGraphLaunch)
	streamId INTEGER,                -- mined regions: the stream; else NULL
	occurrences INTEGER NOT NULL,
	kernels INTEGER NOT NULL,        -- kernels per occurrence (first occurrence)
	nodes INTEGER NOT NULL DEFAULT 0,-- graph nodes per occurrence: kernels + memsets + memcpys
	period INTEGER,                  -- mined: period in nodes
	coverage REAL,                   -- mined: share of the stream's nodes covered
	eager_ns INTEGER NOT NULL,       -- median wall time per occurrence
	busy_ns INTEGER NOT NULL,        -- summed GPU op time per occurrence
	host_idle_ns INTEGER NOT NULL,   -- host-bound idle gaps inside an occurrence
	device_idle_ns INTEGER NOT NULL, -- device-side idle gaps inside an occurrence
	queue_p50_ns INTEGER,            -- launch call start -> op start, median
	queue_p90_ns INTEGER,
	launch_api_p50_ns INTEGER,       -- launch call duration, median
	launch_api_p90_ns INTEGER,
	graph_ns_pred INTEGER,           -- predicted time per occurrence as a CUDA graph
	speedup_pred REAL,               -- eager_ns / graph_ns_pred
	capturable INTEGER NOT NULL,     -- 1: no fatal blocker
	blockers TEXT,                   -- comma-separated fatal blocker kinds
	advisories TEXT,                 -- comma-separated non-fatal kinds (legacy_stream, shape_key, patch_slot)
	one_time_ns INTEGER,             -- capture + instantiate (all shape keys)
	break_even INTEGER,              -- replays to amortise one_time_ns; NULL: never
	extra_mem_bytes INTEGER,
	fingerprint TEXT,                -- hash of the kernel signature sequence
	shape_keys INTEGER,              -- distinct launch configurations
	patch_slots INTEGER,             -- changing pointer arguments
	edge_ns INTEGER NOT NULL DEFAULT 0,  -- v3: eager cost of the edges left outside the graph
	                                 -- (median per occurrence); included in graph_ns_pred
	graph_ns_lo INTEGER,             -- v5: the interval around graph_ns_pred (analyzer/path.c):
	graph_ns_hi INTEGER,             -- the model's validated error, or where the captured path
	                                 -- may run other kernels (capture_path rows) that range
	PRIMARY KEY (runId, regionId)
);

CREATE TABLE IF NOT EXISTS kp_region_occurrences (
	runId INTEGER NOT NULL,
	regionId INTEGER NOT NULL,
	occIndex INTEGER NOT NULL,
	start INTEGER NOT NULL,          -- CPU range (nvtx) or first launch call
	end INTEGER NOT NULL,
	kernels INTEGER NOT NULL,        -- GPU ops (nodes) in this occurrence
	eager_ns INTEGER,
	busy_ns INTEGER,
	host_idle_ns INTEGER,
	device_idle_ns INTEGER,
	first_correlationId INTEGER,
	last_correlationId INTEGER,
	signature TEXT,                  -- fingerprint of this occurrence's sequence
	PRIMARY KEY (runId, regionId, occIndex)
);

-- Why a region cannot be captured whole (fatal = 1), what its warm-up must
-- cover (fatal = 2: seen only in its first occurrences), or what capture
-- must handle (fatal = 0: shape_key, patch_slot, calls and copies at a
-- region's edge, left outside the graph with their cost_ns): the API call
-- and when; detail names the kernel or call, the streams and the fix, and
-- in PyTorch traces the CPU op and Python line it came from. Kinds: sync,
-- blocking_copy, pageable_copy, malloc, free, host_callback,
-- cross_stream_event, legacy_stream, shape_key, patch_slot, host_register,
-- device_limit, nested_capture, graph_replay (fatal = 0 on a region of the
-- program's own graph launches: what runs between its replays, cost_ns the
-- GPU's idle time there), capture_path (fatal = 0: a wait library code skips
-- while a stream captures, such as Hugging Face's attention-mask check in
-- aten::is_nonzero; the region is not split there and its interval is wider).
CREATE TABLE IF NOT EXISTS kp_blockers (
	runId INTEGER NOT NULL,
	regionId INTEGER NOT NULL,
	kind TEXT NOT NULL,
	fatal INTEGER NOT NULL DEFAULT 1,
	api_name TEXT,
	start INTEGER,
	correlationId INTEGER,
	occIndex INTEGER,                -- occurrence it was seen in
	position INTEGER,                -- node index in the occurrence it precedes
	detail TEXT,
	cpu_op TEXT,                     -- v3: innermost CPU op around the call (Kineto cpu_op: aten::nonzero)
	py_frame TEXT,                   -- v3: innermost user Python frame around it, FILE:LINE
	cost_ns INTEGER                  -- v3: left outside at the region's edge: its eager cost in that occurrence
);
CREATE INDEX IF NOT EXISTS kp_ix_blockers ON kp_blockers(runId, regionId);

-- Idle gap before each GPU op (evidence for the launch-bound verdicts).
-- At most --gap-rows rows per run (the largest gaps) are kept.
CREATE TABLE IF NOT EXISTS kp_gaps (
	runId INTEGER NOT NULL,
	deviceId INTEGER NOT NULL,
	streamId INTEGER NOT NULL,
	correlationId INTEGER,
	kernel_start INTEGER NOT NULL,
	gap_ns INTEGER NOT NULL,
	host_bound INTEGER NOT NULL,     -- 1: launch call began after previous op ended
	queue_ns INTEGER,                -- op start - launch call start
	launch_api_ns INTEGER            -- duration of the launch call
);

CREATE TABLE IF NOT EXISTS kp_fusion_candidates (
	runId INTEGER NOT NULL,
	candId INTEGER NOT NULL,
	regionId INTEGER,
	streamId INTEGER,
	first_correlationId INTEGER,     -- first instance
	occurrences INTEGER NOT NULL DEFAULT 1,  -- identical chains seen
	n_kernels INTEGER NOT NULL,
	kernel_names TEXT NOT NULL,      -- ' -> ' separated
	pattern TEXT,                    -- elementwise | broadcast | reduction
	dur_ns INTEGER,                  -- summed kernel time of one instance
	saved_bytes INTEGER,             -- estimated DRAM traffic saved per instance
	saved_nodes INTEGER,
	penalty_ns INTEGER,
	score REAL,                      -- predicted ns saved per instance
	feasible INTEGER NOT NULL,
	reason TEXT,
	dependence TEXT,                 -- args (shared pointers) | adjacency
	aten_chain TEXT,                 -- v7: the ATen op that launched each kernel, with its
					 -- inputs ("aten::mul(f16[1,1,3072], 0.5) > ..."); NULL:
					 -- not every kernel came from a CPU op with shapes
	torch_verdict TEXT,              -- v7: whether kplan.torch fuses that chain, or what stops it
	PRIMARY KEY (runId, candId)
);

-- Plans written by `kplan plan`; never deleted. A new plan for a run is
-- 'current' and the run's older current plans become 'stale' with
-- stale_reason 'superseded by plan N'. body is the whole plan file
-- (header included, byte for byte what was written), so a plan can be
-- recovered from the database; checksum is its header's body-hash.
CREATE TABLE IF NOT EXISTS kp_plans (
	planId INTEGER PRIMARY KEY,
	runId INTEGER NOT NULL,          -- the run the plan was made from
	created_ns INTEGER NOT NULL,     -- when it was stored (wall clock; not in the file)
	path TEXT,                       -- where it was written; NULL for stdout
	checksum TEXT NOT NULL,          -- body-hash, 16 lowercase hex digits
	status TEXT NOT NULL DEFAULT 'current',  -- current | stale
	stale_reason TEXT,
	speedup_pred REAL,               -- predicted speedup of the whole run
	body TEXT NOT NULL               -- the plan file's text
);

-- Predicted vs measured, per region, from runs that applied a plan.
CREATE TABLE IF NOT EXISTS kp_validations (
	planId INTEGER,                  -- kp_plans.planId, when the plan is in this db
	runId INTEGER,                   -- the run that applied the plan
	label TEXT NOT NULL,             -- region label as in the plan
	predicted_ns INTEGER,            -- the plan's graph-ns (or eager-ns) per occurrence
	measured_ns INTEGER,             -- measured per occurrence
	created_ns INTEGER NOT NULL,
	note TEXT
);
