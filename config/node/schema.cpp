// Every key of the node's configuration: its section, name, type (from the
// member it binds), default and meaning. --help prints this table.
#include <caf/config_option_adder.hpp>
#include <caf/io/middleman.hpp>
#include <caf/openssl/manager.hpp>

#include "config/node/node_config.hpp"

namespace troupe {

node_config::node_config()
  : connect_timeout(std::chrono::seconds(60)), request_timeout(std::chrono::seconds(30)),
    worker_wait_timeout(std::chrono::seconds(120)), step_lease_timeout(std::chrono::seconds(60)),
    recovery_timeout(std::chrono::seconds(120)), save_interval(std::chrono::seconds(600)),
    delta_interval(0) {
  load<caf::io::middleman>();
  load<caf::openssl::manager>(); // used only when [openssl] is configured
  // One queue for every scheduler thread: a message wakes a sleeping thread at
  // once, where work stealing's polling sleeps 50 us between looks. A small
  // pull's round trip halves (docs/results.md, "Transfer"). The file may
  // still choose 'stealing'.
  set("scheduler.policy", caf::atom("sharing"));
  add_global_options();
  add_cluster_options();
  add_train_options();
  add_optimizer_options();
  add_step_options();
  add_placement_options();
  add_checkpoint_options();
  add_model_options();
  add_data_options();
  add_data_reading_options();
  add_embedding_options();
  add_metrics_options();
}

void node_config::add_global_options() {
  opt_group{custom_options_, "global"}
    .add(job_name, "job_name",
         "this task's job: ps, worker, chief or evaluator (omit to run every task "
         "of the cluster in this process; TF_CONFIG's task.type replaces it)")
    .add(task_index, "task_index", "this task's index within its job")
    .add(restore, "restore",
         "chief: auto (the latest complete checkpoint in checkpoint.log-dir, if any), never, "
         "or the path of a checkpoint directory");
}

void node_config::add_cluster_options() {
  opt_group{custom_options_, "cluster"}
    .add(chief_hosts, "chief", "the chief task's host:port (exactly one)")
    .add(ps_hosts, "ps", "PS tasks' host:port list")
    .add(worker_hosts, "worker", "worker tasks' host:port list")
    .add(connect_timeout, "connect-timeout", "how long a node retries to reach its peers")
    .add(request_timeout, "request-timeout", "how long any request waits for its reply")
    .add(worker_wait_timeout, "worker-wait-timeout",
         "the chief fails when no worker has been connected this long")
    .add(step_lease_timeout, "step-lease-timeout",
         "async: a worker that holds granted steps and reports nothing this long loses them to "
         "the other workers (it goes on, with new grants, once it reports)")
    .add(recovery_timeout, "recovery-timeout",
         "how long the other tasks wait for a lost ps task or chief to be restarted before "
         "they give up")
    .add(max_workers, "max-workers",
         "elastic membership: workers with indices beyond the listed ones, up to this many, "
         "may join the running job, and any worker may leave it (SIGTERM); 0: only the listed "
         "workers")
    .add(max_connections, "max-connections",
         "connections a ps or chief task holds at most (0: 2 x tasks + 64); "
         "connections silent for 2 x middleman.connection-timeout are closed")
    .add(bulk_path, "bulk-path",
         "workers pull and push tensors on a connection of their own to each ps task (a port "
         "the ps task picks, on its host; docs/protocol.md); false: over the control "
         "connection. Never used under mutual TLS")
    .add(allow_plain, "allow-plain",
         "run without TLS although the cluster's addresses are not all loopback: anyone who "
         "reaches its ports can join, read and change the model (docs/operations.md#security); "
         "without it such a cluster must configure [openssl]");
}

void node_config::add_metrics_options() {
  opt_group{custom_options_, "metrics"}
    .add(metrics_port, "port",
         "the HTTP port of /metrics, /healthz and /readyz: -1 (default) the task's cluster port "
         "+ 10000 (- 10000 above 55535; none for the evaluator and a whole cluster in one "
         "process), 0 none, or a port (docs/operations.md#metrics)")
    .add(metrics_address, "address",
         "the address the metrics port binds to (default: the task's host in the cluster; "
         "0.0.0.0 for every interface, as a pod's probes need)")
    .add(metrics_plain, "plain",
         "serve plain HTTP although [openssl] is set (default: mutual TLS with the cluster's "
         "certificates, as on the cluster ports)");
}

void node_config::add_train_options() {
  opt_group{custom_options_, "train"}
    .add(model, "model",
         "model to train: softmax, mlp, cnn, vgg11, vgg16, vgg19 or custom; for categorical "
         "data lr, fm, mf (biased matrix factorisation) or deepfm, with an [embedding] table; "
         "synthetic (a step of model.step-ms moving model.floats, for benchmarks)")
    .add(mode, "mode",
         "update mode: async, sync (SyncReplicasOptimizer's semantics) or ssp (async, no worker "
         "more than train.staleness steps ahead of the slowest)")
    .add(train.staleness, "staleness",
         "ssp: steps a worker may run ahead of the slowest (0: lockstep; large: async)")
    .add(train.batch_size, "batch-size", "examples per worker step");
}

// [train]: the optimizer the shards apply, and its learning-rate schedule.
void node_config::add_optimizer_options() {
  opt_group{custom_options_, "train"}
    .add(train.optimizer.learning_rate.base, "learning-rate",
         "the (initial) learning rate of the optimizer")
    .add(optimizer, "optimizer",
         "update rule applied on the PS shards: sgd, momentum, adagrad, rmsprop, adam")
    .add(train.optimizer.momentum, "momentum", "momentum: the momentum coefficient")
    .add(train.optimizer.nesterov, "nesterov", "momentum: use Nesterov momentum")
    .add(train.optimizer.initial_accumulator, "initial-accumulator",
         "adagrad: starting value of the squared-gradient accumulator")
    .add(train.optimizer.rms_decay, "rms-decay", "rmsprop: decay of the mean square")
    .add(train.optimizer.rms_momentum, "rms-momentum", "rmsprop: momentum")
    .add(train.optimizer.beta1, "beta1", "adam: decay of the first moment")
    .add(train.optimizer.beta2, "beta2", "adam: decay of the second moment")
    .add(train.optimizer.epsilon, "epsilon",
         "rmsprop/adam: epsilon (0: TF's default, 1e-10 / 1e-8)")
    .add(lr_schedule, "lr-schedule", "constant, exponential (decay) or piecewise (constant)")
    .add(train.optimizer.learning_rate.decay_steps, "lr-decay-steps",
         "exponential: steps per decay by lr-decay-rate")
    .add(train.optimizer.learning_rate.decay_rate, "lr-decay-rate", "exponential: decay rate")
    .add(train.optimizer.learning_rate.staircase, "lr-staircase",
         "exponential: decay in whole steps of lr-decay-steps")
    .add(train.optimizer.learning_rate.boundaries, "lr-boundaries",
         "piecewise: the steps where the rate changes, e.g. [1000, 2000]")
    .add(train.optimizer.learning_rate.values, "lr-values",
         "piecewise: the rates, one more than boundaries, e.g. [0.1, 0.01, 0.001]");
}

// [train]: what a worker step sends, and how long the run is.
void node_config::add_step_options() {
  opt_group{custom_options_, "train"}
    .add(train.clip_norm, "clip-norm", "if > 0: workers clip their gradients to this global norm")
    .add(wire_precision, "wire-precision",
         "fp32, bf16 or fp16: how workers' pushed gradients and pulled values cross the wire "
         "(the shards keep fp32; bf16 and fp16 halve the bytes)")
    .add(train.push_topk, "push-topk",
         "if > 0: workers push only this fraction of each gradient, its largest magnitudes, "
         "and add the rest to their next push (error feedback); 0: off")
    .add(train.pull_ahead, "pull-ahead",
         "async: each worker pulls the next step's values while it computes and pushes this "
         "one (one step staler, links kept busy)")
    .add(train.report_every, "report-every",
         "async: workers report their steps to the chief this many at a time (1: each step; "
         "16-64 for many workers or short steps cut the chief's messages per step by as much)")
    .add(train.last_step, "last-step",
         "global steps to train; then the cluster stops (0: until stopped by SIGTERM)")
    .add(train.epochs, "epochs",
         "if > 0: passes over the training set instead of last-step (sets last-step)")
    .add(seed, "seed", "seed of initial values and data order")
    .add(train.data_dir, "data-dir",
         "directory with the Fashion-MNIST .gz files (the data when [data] names none)")
    .add(train.log_interval, "log-interval", "progress line every N steps (0: off)")
    .add(train.eval_interval, "eval-interval",
         "the chief evaluates on the test (or validation) set every N global steps while "
         "training (0: only at the end)");
}

// [train]: where variables and workers go, and how sync steps aggregate.
void node_config::add_placement_options() {
  opt_group{custom_options_, "train"}
    .add(placement, "placement",
         "variables over PS shards: round_robin (TF), greedy_bytes, or balanced (splits "
         "variables so that no shard holds more than (1 + placement-epsilon) x the mean)")
    .add(train.placement_epsilon, "placement-epsilon", "balanced: allowed excess over the mean")
    .add(partitioners, "partitioners",
         "rules splitting variables, first match wins, e.g. [\"fc1/weights fixed_size "
         "shards=2\", \"conv* min_max max_partitions=4 min_slice_bytes=262144\", \"* "
         "axis_size max_shard_bytes=1048576\"]; each takes axis=A (0)")
    .add(device, "device", "where workers compute: cpu or cuda:N")
    .add(worker_devices, "worker-devices",
         "per worker index, overrides device, e.g. [\"cpu\", \"cuda:0\"] (CPU and GPU workers mix)")
    .add(train.gpu_memory_fraction, "gpu-memory-fraction",
         "share of a GPU's memory one GPU worker may hold; more than is free is an error")
    .add(train.worker_batch_sizes, "worker-batch-sizes",
         "per worker index, overrides batch-size, e.g. [100, 1024]")
    .add(max_refused_steps, "max-refused-steps",
         "the chief aborts after this many refused updates (non-finite gradients)")
    .add(train.shuffle, "shuffle", "reshuffle each worker's data every epoch (false: fixed order)")
    .add(replicas_to_aggregate, "replicas-to-aggregate",
         "sync: gradients averaged per update, R (0: every listed worker; \"all\": every "
         "worker taking part now, following joiners and leavers)")
    .add(total_num_replicas, "total-num-replicas",
         "sync: workers taking part, N; must equal the number of worker tasks (0: that "
         "number). Backups come from replicas-to-aggregate < N")
    .add(on_worker_loss, "on-worker-loss",
         "sync, when fewer than R workers are left: shrink (average over those alive) or "
         "wait (hold the step until one restarts, at most cluster.worker-wait-timeout)");
}

void node_config::add_checkpoint_options() {
  opt_group{custom_options_, "checkpoint"}
    .add(train.checkpoint.log_dir, "log-dir",
         "the chief's log directory for checkpoints, relative to its working directory "
         "(empty: none)")
    .add(save_interval, "save-interval", "save a checkpoint this often (0: not by time)")
    .add(train.checkpoint.save_steps, "save-steps",
         "and/or every this many global steps (0: not by steps); always at the end")
    .add(keep, "keep", "complete checkpoints kept, newest first (TF's max_to_keep)")
    .add(train.checkpoint.summaries, "summaries",
         "the chief writes TensorBoard event files into log-dir (loss, accuracy, speed, "
         "learning rate, gradients dropped, checkpoints, evaluations, ps traffic)");
  opt_group{custom_options_, "export"}
    .add(delta_interval, "delta-interval",
         "chief: every this long, write the next serving version: a delta of the rows and "
         "variables changed since the last, from the newest checkpoint (checkpoint.save-interval "
         "is lowered to it); 0: none (docs/online.md)")
    .add(base_every, "base-every", "a full base every this many deltas")
    .add(train.checkpoint.serving_dir, "dir",
         "where the serving versions go (empty: <checkpoint.log-dir>/serving)");
}

void node_config::add_model_options() {
  opt_group{custom_options_, "model"}
    .add(train.network.layers, "layers",
         "model custom: one string per layer, e.g. [\"conv2d filters=32 kernel=5\", \"relu\", "
         "\"max_pool size=2\", \"flatten\", \"dense units=10\"]")
    .add(model_input, "input",
         "one example's shape, e.g. [28, 28, 1] (default: the data's; a shape with as many "
         "values reshapes it)")
    .add(model_classes, "classes", "classes to tell apart (default: the data's)")
    .add(train.network.vgg_width, "vgg-width",
         "vgg11/16/19: multiplies the channel and fc widths (1 = the paper's)")
    .add(train.network.synthetic.step_ms, "step-ms",
         "synthetic: the milliseconds a step stands for (0 to 60000)")
    .add(train.network.synthetic.busy, "step-busy",
         "synthetic: spend the step on the CPU (true) or asleep (false)")
    .add(train.network.synthetic.floats, "floats",
         "synthetic: the floats of its one variable, what every pull and push moves");
}

void node_config::add_data_options() {
  auto& d = train.data;
  opt_group{custom_options_, "data"}
    .add(d.train, "train",
         "training files: a list of paths and globs, e.g. [\"data/train-*.csv\"] (none: "
         "Fashion-MNIST from train.data-dir)")
    .add(d.train_labels, "train-labels", "IDX and .npy: one labels file per training file")
    .add(d.test, "test", "test files (the chief evaluates on them)")
    .add(d.test_labels, "test-labels", "IDX and .npy: one labels file per test file")
    .add(d.validation, "validation", "validation files; evaluated instead of test where given")
    .add(d.validation_labels, "validation-labels",
         "IDX and .npy: one labels file per validation file")
    .add(d.format, "format",
         "idx, csv, npy, criteo (Criteo's TSV: label, 13 integers, 26 categories) or libsvm "
         "(default: from the first file's name: .tsv is criteo, .svm/.libsvm libsvm)")
    .add(d.csv.categorical_columns, "categorical-columns",
         "CSV: columns whose values are categories (ids or any strings, hashed stably), one "
         "field of keys each for the embedding models, e.g. [\"userId\", \"movieId\"]")
    .add(d.csv.max_keys, "max-keys", "libsvm: keys per example at most (a longer line is bad)")
    .add(d.csv.header, "csv-header", "CSV: the first line names the columns")
    .add(csv_delimiter, "csv-delimiter", "CSV: the column separator, one character or \"tab\"")
    .add(d.csv.label_column, "label-column",
         "CSV: the label's column, a name from the header or a 0-based index as text (\"0\")")
    .add(d.csv.ignore_columns, "ignore-columns",
         "CSV: columns that are neither features nor the label (names or indices)");
}

// [data]: what the values are: classes, normalisation, empty cells, bad records, reading.
void node_config::add_data_reading_options() {
  auto& d = train.data;
  opt_group{custom_options_, "data"}
    .add(d.label_names, "label-names",
         "the classes' names in class order, for labels written as names (default: sorted)")
    .add(d.classes, "classes", "classes (0: one more than the largest integer label)")
    .add(d.input_shape, "input-shape",
         "one example's shape, e.g. [28, 28, 1] for 784 columns (default: the files')")
    .add(normalize, "normalize",
         "auto (uint8 IDX/.npy scaled to [0, 1], CSV standardized, else none), none, scale "
         "(x * data.scale) or "
         "standardize ((x - mean) / stddev per feature)")
    .add(d.scale, "scale", "normalize = scale: the factor")
    .add(d.mean, "mean", "normalize = standardize: per-feature means (default: the training set's)")
    .add(d.stddev, "stddev",
         "normalize = standardize: per-feature standard deviations (default: the training set's)")
    .add(task, "task",
         "classification (labels are classes; softmax cross-entropy, accuracy) or regression "
         "(the label column of a CSV is a real target; mean squared error, RMSE)")
    .add(missing_values, "missing-values",
         "CSV: what an empty numeric cell becomes: mean (the column's training mean, and an "
         "indicator feature where the training set has empty cells), zero (0, and the "
         "indicator) or refuse (a bad record)")
    .add(missing_fill, "missing-fill",
         "CSV: a column's own value for its empty cells, as [\"column=value\", ...] (with the "
         "indicator); overrides missing-values for that column")
    .add(bad_records, "bad-records",
         "fail (a bad record ends the run, naming it) or skip (counted per file and reported)")
    .add(d.shuffle_buffer, "shuffle-buffer",
         "examples each worker holds to shuffle from (tf.data's shuffle buffer); a share "
         "that fits is read once and kept; 0: the whole share when it takes at most 256 MiB, "
         "else 10000")
    .add(d.prefetch, "prefetch", "batches each worker's reader thread prepares ahead (0: none)")
    .add(d.follow, "follow",
         "train on a stream: data.train names one directory whose files (Criteo or libsvm, "
         "renamed into place when complete, numbered by the digits of their names) are read as "
         "they arrive, without end; shape and classes come from data.test (docs/online.md)")
    .add(d.eval_memory_bytes, "eval-memory-bytes",
         "the evaluation set (validation, else test) is read once and kept in memory when its "
         "examples take at most this many bytes (default 268435456: 256 MiB), else read from its "
         "files at each evaluation, a batch at a time; 0: always from the files");
}

void node_config::add_embedding_options() {
  auto& e = train.embedding;
  opt_group{custom_options_, "embedding"}
    .add(e.dim, "dim", "fm, mf, deepfm: factors per key (a row: its weight and dim factors)")
    .add(embedding_kind, "kind",
         "hash (int64 keys, rows created on first push) or fixed (TF's partitioned variable: "
         "each field's ids in [0, its vocabulary size))")
    .add(e.vocabulary, "vocabulary",
         "kind = fixed: rows per categorical field, in the data's field order, e.g. [672, 193610]")
    .add(embedding_ids, "id-mapping",
         "kind = fixed: identity (an integer id is its row, strings hashed; an id past its "
         "field's size is a bad record) or hash (every value hashed into its field's rows, "
         "e.g. Criteo's hex tokens)")
    .add(embedding_partition, "partition",
         "kind = fixed: TF's partition strategy over the shards, mod (id % shards) or div "
         "(contiguous ranges)")
    .add(embedding_initializer, "initializer",
         "a row before its first push: zeros, uniform, normal or truncated_normal")
    .add(e.init_scale, "init-scale", "normal kinds: the deviation; uniform: the bound")
    .add(embedding_optimizer, "optimizer",
         "the shards' sparse update rule, touching pushed rows only: sgd, adagrad, ftrl, "
         "lazy_adam")
    .add(e.optimizer.learning_rate, "learning-rate", "the sparse optimizer's learning rate")
    .add(e.optimizer.initial_accumulator, "initial-accumulator",
         "adagrad, ftrl: the accumulator's starting value")
    .add(e.optimizer.l1, "l1", "ftrl: L1 regularisation")
    .add(e.optimizer.l2, "l2", "ftrl: L2 regularisation")
    .add(e.optimizer.lr_power, "lr-power", "ftrl: the learning rate's power (<= 0)")
    .add(e.optimizer.beta1, "beta1", "lazy_adam: decay of the first moment")
    .add(e.optimizer.beta2, "beta2", "lazy_adam: decay of the second moment")
    .add(e.optimizer.epsilon, "epsilon", "lazy_adam: epsilon")
    .add(e.buckets, "buckets",
         "virtual buckets (a power of two): keys go to buckets, buckets to shards")
    .add(e.admit_after, "admit-after", "occurrences before a key gets a row (0: at once)")
    .add(e.admit_probability, "admit-probability", "the chance a push creates a key's row")
    .add(e.evict_after_steps, "evict-after-steps",
         "rows not updated for this many table versions are evicted (0: off)")
    .add(e.evict_l2_below, "evict-l2-below", "rows with a smaller L2 norm are evicted (0: off)")
    .add(e.max_bytes_per_shard, "max-bytes-per-shard",
         "a shard's table above this many bytes evicts its least recently updated rows (0: no "
         "cap)")
    .add(e.evict_interval, "evict-interval", "table versions between eviction passes")
    .add(sync_reduction, "sync-reduction",
         "sync: per_row (a row's mean over the workers that touched it, TF's) or replicas "
         "(its sum divided by R)")
    .add(e.max_keys_per_request, "max-keys-per-request",
         "keys one pull or push of rows may name; a shard refuses more")
    .add(e.max_norm, "max-norm", "if > 0: looked-up rows are clipped to this L2 norm (TF's)")
    .add(e.deep_layers, "deep-layers", "deepfm: the MLP's hidden widths, e.g. [64, 32]");
}

} // namespace troupe
