// Every configuration error is one clear message naming the key and the fix,
// found before anything starts; the shipped examples load cleanly.
#define BOOST_TEST_MODULE config
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include <boost/test/unit_test.hpp>

#include "actors/protocol/protocol.hpp"
#include "config/node/node_config.hpp"

using namespace troupe;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> worker0{"--job_name=worker", "--task_index=0"};

// A data directory in Fashion-MNIST's layout: 1000 training and 10 test
// examples of 28x28 (plain IDX files; zlib reads them like gzipped ones).
struct fixture {
  fs::path dir = fs::temp_directory_path() / ("troupe-config-" + std::to_string(::getpid()));
  static void write_idx(const fs::path& path, uint32_t magic, std::vector<uint32_t> dims) {
    std::string bytes;
    auto put = [&](uint32_t v) {
      for (int shift = 24; shift >= 0; shift -= 8)
        bytes += static_cast<char>((v >> shift) & 0xff);
    };
    put(magic);
    size_t values = 1;
    for (auto d : dims) {
      put(d);
      values *= d;
    }
    for (size_t i = 0; i < values; ++i)
      bytes += static_cast<char>(i % 10);
    std::ofstream(path, std::ios::binary) << bytes;
  }
  fixture() {
    fs::create_directories(dir / "data");
    write_idx(dir / "data" / "train-images-idx3-ubyte.gz", 2051, {1000, 28, 28});
    write_idx(dir / "data" / "train-labels-idx1-ubyte.gz", 2049, {1000});
    write_idx(dir / "data" / "t10k-images-idx3-ubyte.gz", 2051, {10, 28, 28});
    write_idx(dir / "data" / "t10k-labels-idx1-ubyte.gz", 2049, {10});
  }
  ~fixture() { fs::remove_all(dir); }

  // A valid file; `set` replaces or adds keys ("cluster.ps" -> its value).
  std::string base(const std::map<std::string, std::string>& set = {}) const {
    std::map<std::string, std::map<std::string, std::string>> sections{
      {"cluster",
       {{"chief", "[\"127.0.0.1:7000\"]"},
        {"ps", "[\"127.0.0.1:7001\"]"},
        {"worker", "[\"127.0.0.1:7101\", \"127.0.0.1:7102\"]"}}},
      {"train", {{"data-dir", "\"" + (dir / "data").string() + "\""}}}};
    for (auto& [key, value] : set)
      sections[key.substr(0, key.find('.'))][key.substr(key.find('.') + 1)] = value;
    std::string text;
    for (auto name : {"cluster", "train"}) { // [train] last: tests append its keys
      text += std::string("[") + name + "]\n";
      for (auto& [key, value] : sections[name])
        text += key + " = " + value + "\n";
    }
    return text;
  }

  load_outcome load(const std::string& text, std::vector<std::string> args = {}) {
    auto path = (dir / "test.conf").string();
    std::ofstream(path) << text;
    std::vector<std::string> argv_s{"troupe-node", "--config-file=" + path};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s)
      argv.push_back(a.data());
    last_cfg = std::make_unique<node_config>();
    return load_node_config(*last_cfg, static_cast<int>(argv.size()), argv.data());
  }

  std::unique_ptr<node_config> last_cfg; // of the last load()

  // Exactly one error, containing every part.
  void expect_error(const load_outcome& out, std::initializer_list<std::string> parts) {
    BOOST_TEST((out.what == load_outcome::action::fail));
    for (auto& e : out.errors)
      BOOST_TEST_MESSAGE(e);
    BOOST_REQUIRE_EQUAL(out.errors.size(), 1u);
    for (auto& p : parts)
      BOOST_TEST(out.errors[0].find(p) != std::string::npos, "'" << p << "' in: " << out.errors[0]);
  }

  // The same for worker 0 loading the valid file with `more` appended (to
  // its [train] section, unless `more` opens another).
  void expect_rejected(const std::string& more, std::initializer_list<std::string> parts) {
    expect_error(load(base() + more, worker0), parts);
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(node_config_tests, fixture)

BOOST_AUTO_TEST_CASE(a_good_file_loads) {
  auto out = load(base() + "batch-size = 64\nlearning-rate = 1\nlast-step = 7\n", worker0);
  BOOST_REQUIRE(out.errors.empty());
  BOOST_TEST((out.what == load_outcome::action::run));
  BOOST_TEST(out.setup.cluster.worker.size() == 2u);
  BOOST_TEST(out.setup.cluster.ps[0].port == 7001);
  BOOST_TEST(out.setup.train.batch_size == 64);
  BOOST_TEST(out.setup.train.optimizer.learning_rate.base == 1.0); // integer for a real
  BOOST_TEST(out.setup.train.last_step == 7);
  BOOST_TEST((out.setup.job == job_kind::worker));
}

BOOST_AUTO_TEST_CASE(ssp_wire_precision_and_a_fixed_size_table_load_from_the_file) {
  auto out = load(base() + "mode = \"ssp\"\nstaleness = 0\n", worker0);
  BOOST_REQUIRE(out.errors.empty());
  BOOST_TEST((out.setup.train.mode == update_mode::ssp));
  BOOST_TEST(out.setup.train.staleness == 0);
  out = load(base() + "mode = \"ssp\"\nstaleness = -2\n", worker0);
  BOOST_TEST(!out.errors.empty());
  out = load(base() + "report-every = 32\n", worker0);
  BOOST_REQUIRE(out.errors.empty());
  BOOST_TEST(out.setup.train.report_every == 32);
  out = load(base() + "mode = \"sync\"\nreport-every = 32\n", worker0);
  BOOST_TEST(!out.errors.empty());
  out = load(base() + "wire-precision = \"bf16\"\n", worker0);
  BOOST_REQUIRE(out.errors.empty());
  BOOST_TEST((out.setup.train.wire_precision == wire_precision::bf16));
  out = load(base() + "wire-precision = \"fp8\"\n", worker0);
  BOOST_REQUIRE(!out.errors.empty());
  BOOST_TEST(out.errors[0].find("train.wire-precision") != std::string::npos, out.errors[0]);
  out = load(base()
               + "[embedding]\nkind = \"fixed\"\nvocabulary = [5, 7]\n"
                 "id-mapping = \"hash\"\npartition = \"div\"\n",
             worker0);
  BOOST_TEST((out.setup.train.embedding.kind == table_kind::fixed));
  BOOST_TEST(out.setup.train.embedding.vocabulary == (std::vector<int64_t>{5, 7}),
             boost::test_tools::per_element());
  BOOST_TEST((out.setup.train.embedding.ids == id_mapping::hash));
  BOOST_TEST((out.setup.train.embedding.partition == partition_strategy::div));
  out = load(base() + "[embedding]\npartition = \"diagonal\"\n", worker0);
  BOOST_TEST(!out.errors.empty());
}

BOOST_AUTO_TEST_CASE(sync_settings_load_with_defaults) {
  auto out = load(base() + "mode = \"sync\"\non-worker-loss = \"wait\"\nshuffle = false\n",
                  worker0);
  BOOST_REQUIRE(out.errors.empty());
  BOOST_TEST((out.setup.train.mode == update_mode::sync));
  BOOST_TEST(out.setup.train.replicas_to_aggregate == 2); // R defaults to N
  BOOST_TEST(out.setup.train.total_num_replicas == 2);
  BOOST_TEST((out.setup.train.on_worker_loss == worker_loss_policy::wait));
  BOOST_TEST(!out.setup.train.shuffle);
  out = load(base() + "mode = \"sync\"\nreplicas-to-aggregate = 1\n", worker0);
  BOOST_REQUIRE(out.errors.empty());
  BOOST_TEST(out.setup.train.replicas_to_aggregate == 1);
}

// Issue 29: elastic membership. cluster.max-workers admits worker indices
// beyond the list (on the command line and in TF_CONFIG); replicas-to-
// aggregate takes "all" (R follows the membership) beside a count.
BOOST_AUTO_TEST_CASE(elastic_membership_settings_load_and_are_checked) {
  auto elastic = base({{"cluster.max-workers", "4"}});
  auto out = load(elastic + "mode = \"sync\"\nreplicas-to-aggregate = \"all\"\n",
                  {"--job_name=worker", "--task_index=3"});
  BOOST_REQUIRE(out.errors.empty());
  BOOST_TEST(out.setup.task == 3);
  BOOST_TEST(out.setup.runtime.max_workers == 4);
  BOOST_TEST(out.setup.train.replicas_follow_membership);
  BOOST_TEST(out.setup.train.replicas_to_aggregate == 2);       // R starts at the listed N
  out = load(elastic + "replicas-to-aggregate = 1\n", worker0); // a count still reads
  BOOST_REQUIRE(out.errors.empty());
  BOOST_TEST(out.setup.train.replicas_to_aggregate == 1);
  BOOST_TEST(!out.setup.train.replicas_follow_membership);
  out = load(base(), {"--job_name=worker", "--task_index=0", "--train.replicas-to-aggregate=all"});
  BOOST_REQUIRE(out.errors.empty());
  BOOST_TEST(out.setup.train.replicas_follow_membership);
  expect_error(load(elastic, {"--job_name=worker", "--task_index=4"}),
               {"--task_index=4 is out of range", "valid: 0..3"});
  expect_error(load(base({{"cluster.max-workers", "1"}}), worker0),
               {"cluster.max-workers = 1 is below the 2 listed worker(s)"});
  expect_error(load(base({{"cluster.max-workers", "5000"}}), worker0),
               {"cluster.max-workers = 5000 is out of range"});
  // 1000 training examples cannot give 1001 workers a share each.
  expect_error(load(base({{"cluster.max-workers", "1001"}}), worker0),
               {"gets no examples", "lower cluster.max-workers"});
  expect_error(load(base() + "replicas-to-aggregate = \"most\"\n", worker0),
               {"train.replicas-to-aggregate = \"most\" is neither a count nor \"all\""});
}

BOOST_AUTO_TEST_CASE(epochs_set_last_step) {
  auto out = load(base() + "epochs = 2\nbatch-size = 100\n", worker0);
  BOOST_REQUIRE(out.errors.empty());
  BOOST_TEST(out.setup.train.last_step == 20); // 2 x 1000 examples / 100
  out = load(base() + "epochs = 2\nbatch-size = 100\nmode = \"sync\"\n", worker0);
  BOOST_REQUIRE(out.errors.empty());
  BOOST_TEST(out.setup.train.last_step == 10); // each update uses 2 workers' batches
  expect_rejected("epochs = -1\n", {"train.epochs"});
}

// [data] names the files: the model takes the data's shape and classes;
// [model] given is checked against them; a worker left without examples,
// or a model that does not fit, stops the node before anything starts.
BOOST_AUTO_TEST_CASE(the_data_section_sizes_the_model_and_is_checked) {
  auto csv = (dir / "small.csv").string();
  std::ofstream(csv) << "a,b,c,label\n1,2,3,cat\n4,5,6,dog\n7,8,9,cat\n";
  auto data = "[data]\ntrain = [\"" + csv + "\"]\ntest = [\"" + csv + "\"]\n";
  auto out = load(base() + "batch-size = 1\n" + data, worker0);
  BOOST_REQUIRE(out.errors.empty());
  BOOST_TEST((out.setup.train.network.input == shape_t{3}));
  BOOST_TEST(out.setup.train.network.classes == 2);
  BOOST_REQUIRE(out.setup.data);
  BOOST_TEST(out.setup.data->train->usable_records() == 3u);
  expect_rejected("batch-size = 1\n" + data + "[model]\ninput = [4]\n",
                  {"model.input = [4] holds 4 values per example, but the data's examples have "
                   "shape [3]"});
  expect_rejected("batch-size = 1\n" + data + "[model]\nclasses = 3\n",
                  {"model.classes = 3, but the data has 2 classes"});
  expect_rejected("batch-size = 1\nmodel = \"cnn\"\n" + data,
                  {"model cnn takes examples of shape [height, width, channels]"});
  expect_error(load(base({{"cluster.worker", "[\"127.0.0.1:7101\", \"127.0.0.1:7102\", "
                                             "\"127.0.0.1:7103\", \"127.0.0.1:7104\"]"}})
                      + "batch-size = 1\n" + data,
                    worker0),
               {"worker 0 of 4 gets no examples"});
  // A ps task reads no data: it starts without the files.
  auto ps = load(base()
                   + "batch-size = 1\n[data]\ntrain = [\"/nonexistent/*.csv\"]\ntest = "
                     "[\"/nonexistent/t.csv\"]\n",
                 {"--job_name=ps", "--task_index=0"});
  BOOST_TEST(ps.errors.empty(), (ps.errors.empty() ? "" : ps.errors[0]));
}

// A run on a stream: data.follow on a directory takes its shape from
// data.test; what cannot follow a directory is refused by name; a delta
// interval lowers the checkpoints' and derives the serving directory;
// last-step 0 runs until stopped.
BOOST_AUTO_TEST_CASE(a_stream_run_loads_and_what_cannot_follow_is_refused) {
  std::filesystem::create_directories(dir / "stream");
  auto test = (dir / "test.svm").string();
  std::ofstream(test) << "0 1:1\n1 2:1\n";
  auto data = "[data]\ntrain = [\"" + (dir / "stream").string() + "\"]\ntest = [\"" + test
              + "\"]\nformat = \"libsvm\"\nfollow = true\n";
  auto sections = "[checkpoint]\nlog-dir = \"" + (dir / "logs").string()
                  + "\"\nsave-interval = 60s\n[export]\ndelta-interval = 10s\n";
  auto out = load(base() + "model = \"lr\"\nlast-step = 0\n" + data + sections, worker0);
  BOOST_REQUIRE_MESSAGE(out.errors.empty(), (out.errors.empty() ? "" : out.errors[0]));
  BOOST_TEST(out.setup.data->train->follow == (dir / "stream").string());
  BOOST_TEST(out.setup.train.last_step == limits::max_steps);
  BOOST_TEST(out.setup.train.checkpoint.save_interval.count() == 10000);
  BOOST_TEST(out.setup.train.checkpoint.serving_dir == (dir / "logs").string() + "/serving");
  expect_rejected("model = \"lr\"\nepochs = 1\n" + data,
                  {"train.epochs needs the data's size", "data.follow"});
  expect_error(load(base({{"cluster.max-workers", "4"}}) + "model = \"lr\"\n" + data, worker0),
               {"data.follow shares the stream's files among a fixed set of workers"});
  expect_rejected("[export]\ndelta-interval = 10s\n",
                  {"export.delta-interval needs checkpoint.log-dir"});
}

// TF_CONFIG names the cluster and this task; it takes precedence over the
// file's [cluster] and needs no --job_name; --dump-config says where values
// came from.
BOOST_AUTO_TEST_CASE(tf_config_names_the_cluster_and_the_task) {
  struct env_guard {
    env_guard(const std::string& v) { ::setenv("TF_CONFIG", v.c_str(), 1); }
    ~env_guard() { ::unsetenv("TF_CONFIG"); }
  };
  {
    env_guard tf(
      R"({"cluster": {"master": ["10.0.0.1:2222"], "ps": ["10.0.0.2:2222", )"
      R"("10.0.0.3:2222"], "worker": ["10.0.0.4:2222"]}, "task": {"type": "ps", "index": 1}})");
    const std::string plain = "--cluster.allow-plain"; // 10.0.0.x without [openssl]
    auto out = load(base(), {plain});
    BOOST_REQUIRE(out.errors.empty());
    BOOST_TEST((out.setup.job == job_kind::ps));
    BOOST_TEST(out.setup.task == 1);
    BOOST_TEST(out.setup.cluster.chief.at(0).to_string() == "10.0.0.1:2222");
    BOOST_TEST(out.setup.cluster.ps.size() == 2u);
    BOOST_TEST(out.setup.cluster.worker.size() == 1u);
    auto dump = load(base(), {plain, "--dump-config"});
    auto text = dump_config(*last_cfg, dump.setup);
    BOOST_TEST(text.find("; job: ps:1 (from TF_CONFIG)") != std::string::npos, text);
    BOOST_TEST(text.find("; from TF_CONFIG\nps = [\"10.0.0.2:2222\", \"10.0.0.3:2222\"]")
                 != std::string::npos,
               text);
    expect_error(load(base(), {plain, "--job_name=worker"}),
                 {"--job_name=worker disagrees with TF_CONFIG's task.type (ps)"});
  }
  {
    env_guard tf("{\"cluster\": {}, \"task\": 3}");
    auto out = load(base());
    BOOST_TEST((out.what == load_outcome::action::fail));
    BOOST_REQUIRE(!out.errors.empty());
    BOOST_TEST(out.errors[0].find("TF_CONFIG: cluster.chief (or master) must list exactly one")
                 != std::string::npos,
               out.errors[0]);
  }
}

// Issue 25: a file with only [train] keys was refused for lacking [cluster];
// like no file at all, it now runs the default cluster in one process.
BOOST_AUTO_TEST_CASE(a_file_without_a_cluster_runs_the_embedded_one) {
  auto train_only = "[train]\ndata-dir = \"" + (dir / "data").string()
                    + "\"\nlast-step = 30\nbatch-size = 32\n";
  auto out = load(train_only);
  BOOST_REQUIRE_MESSAGE(out.errors.empty(), (out.errors.empty() ? "" : out.errors[0]));
  BOOST_TEST(out.setup.whole_cluster);
  BOOST_TEST(out.setup.embedded_defaults);
  BOOST_TEST(out.setup.cluster.ps.size() == 2u);
  BOOST_TEST(out.setup.train.last_step == 30);
  BOOST_TEST(out.setup.train.batch_size == 32);
  expect_error(load(train_only, worker0),
               {"--job_name=worker needs a cluster", "lists no tasks", "add a [cluster] section"});
  auto cli = load(train_only,
                  {"--cluster.chief=[\"127.0.0.1:7000\"]", "--cluster.ps=[\"127.0.0.1:7001\"]",
                   "--cluster.worker=[\"127.0.0.1:7101\"]", "--job_name=worker"});
  BOOST_TEST(cli.errors.empty(), (cli.errors.empty() ? "" : cli.errors[0]));
}

// --config-file=DIR named the cluster's lack of a chief; now the directory.
BOOST_AUTO_TEST_CASE(a_directory_as_config_file_is_named) {
  std::vector<std::string> argv_s{"troupe-node", "--config-file=" + dir.string()};
  std::vector<char*> argv;
  for (auto& a : argv_s)
    argv.push_back(a.data());
  node_config cfg;
  auto out = load_node_config(cfg, static_cast<int>(argv.size()), argv.data());
  expect_error(out, {"the config file '" + dir.string() + "' is a directory",
                     "--config-file=" + dir.string() + "/caf-application.conf"});
}

// TF_CONFIG strings are shown escaped: a NUL or an escape sequence in
// task.type does not reach the terminal raw.
BOOST_AUTO_TEST_CASE(tf_config_strings_are_shown_escaped) {
  std::string tf =
    R"({"cluster": {"chief": ["127.0.0.1:2222"], "ps": ["127.0.0.1:2223"], )"
    R"("worker": ["127.0.0.1:2224"]}, "task": {"type": "ps\u0000\u001b[2J", "index": 0}})";
  ::setenv("TF_CONFIG", tf.c_str(), 1);
  auto out = load(base());
  ::unsetenv("TF_CONFIG");
  BOOST_REQUIRE(!out.errors.empty());
  auto& e = out.errors[0];
  BOOST_TEST(e.find("task.type \"ps\\x00\\x1b[2J\" is not a job") != std::string::npos, e);
  BOOST_TEST(e.find('\0') == std::string::npos);
  BOOST_TEST(e.find('\x1b') == std::string::npos);
}

// Plain TCP between hosts lets anyone who reaches a port act as a task: a
// cluster whose addresses are not all loopback needs [openssl] or an explicit
// cluster.allow-plain (issue 25).
BOOST_AUTO_TEST_CASE(a_plain_cluster_across_hosts_needs_tls_or_allow_plain) {
  struct env_guard {
    env_guard(const std::string& v) { ::setenv("TF_CONFIG", v.c_str(), 1); }
    ~env_guard() { ::unsetenv("TF_CONFIG"); }
  };
  auto across = [](const std::string& worker_host) {
    return R"({"cluster": {"chief": ["127.0.0.1:2222"], "ps": ["localhost:2223"], "worker": [")"
           + worker_host + R"(:2224"]}, "task": {"type": "ps", "index": 0}})";
  };
  {
    env_guard tf(across("127.0.0.5"));
    auto out = load(base());
    BOOST_TEST(out.errors.empty(), (out.errors.empty() ? "" : out.errors[0]));
  }
  for (auto host : {"10.0.0.4", "worker-0.troupe.svc", "192.168.1.7"}) {
    env_guard tf(across(host));
    expect_error(load(base()), {std::string(host) + ":2224 is not a loopback address",
                                "[openssl] is not configured", "scripts/make-certs",
                                "cluster.allow-plain = true"});
    auto allowed = load(base(), {"--cluster.allow-plain"});
    BOOST_TEST(allowed.errors.empty(), (allowed.errors.empty() ? "" : allowed.errors[0]));
  }
  auto spans = base(
    {{"cluster.chief", "[\"10.0.0.1:2222\"]"}, {"cluster.ps", "[\"10.0.0.2:2222\"]"}});
  expect_error(load(spans, {"--job_name=ps", "--task_index=0"}),
               {"10.0.0.1:2222 is not a loopback address"});
  auto in_file = load(base({{"cluster.chief", "[\"10.0.0.1:2222\"]"},
                            {"cluster.ps", "[\"10.0.0.2:2222\"]"},
                            {"cluster.allow-plain", "true"}}),
                      {"--job_name=ps", "--task_index=0"});
  BOOST_TEST(in_file.errors.empty(), (in_file.errors.empty() ? "" : in_file.errors[0]));
}
BOOST_AUTO_TEST_CASE(placement_defaults_to_balanced_and_partitioner_rules_are_checked) {
  auto good = load(base()
                     + "model = \"mlp\"\npartitioners = [\"hidden1/weights fixed_size "
                       "shards=2\", \"hidden* min_max max_partitions=2 "
                       "min_slice_bytes=512\"]\n",
                   worker0);
  BOOST_REQUIRE(good.errors.empty());
  BOOST_TEST((good.setup.train.placement == placement_strategy::balanced));
  BOOST_TEST(good.setup.train.partitioners.size() == 2u);
  expect_rejected("model = \"mlp\"\npartitioners = [\"hidden3/* fixed_size "
                  "shards=2\"]\n",
                  {"train.partitioners", "'hidden3/*' matches no variable", "hidden1/weights"});
  expect_rejected("partitioners = [\"softmax/* fixed_size shards=2 axis=1\"]\n",
                  {"train.partitioners", "softmax/biases has shape [10], no axis 1"});
  expect_rejected("partitioners = [\"softmax/weights fixed_size shards=0\"]\n",
                  {"train.partitioners", "num_shards >= 1"});
  expect_rejected("partitioners = [\"softmax/weights min_maxx max_partitions=2\"]\n",
                  {"unknown partitioner 'min_maxx'"});
}

BOOST_AUTO_TEST_CASE(models_and_optimizers_are_checked_before_start) {
  auto good = load(
    base()
      + "model = \"custom\"\noptimizer = \"adam\"\n"
        "lr-schedule = \"piecewise\"\nlr-boundaries = [100]\nlr-values = [0.1, 0.01]\n"
        "[model]\nlayers = [\"conv2d filters=2 kernel=3\", \"relu\", \"flatten\", "
        "\"dense units=10\"]\n",
    worker0);
  BOOST_REQUIRE(good.errors.empty());
  BOOST_TEST((good.setup.train.optimizer.kind == optimizer_kind::adam));
  BOOST_TEST(good.setup.train.optimizer.learning_rate.values.size() == 2u);
  expect_rejected("model = \"custom\"\n[model]\nlayers = [\"dense units=10\", "
                  "\"conv2d filters=2 kernel=3\"]\n",
                  {"model.layers", "conv2d"});
  expect_rejected("model = \"custom\"\n[model]\nlayers = [\"dense unit=10\"]\n",
                  {"model.layers[0]", "unknown parameter 'unit'"});
  expect_rejected("model = \"custom\"\n[model]\ninput = [28, 27]\n"
                  "layers = [\"dense units=10\"]\n",
                  {"model.input", "784"});
  expect_rejected("optimizer = \"adamw\"\n",
                  {"train.optimizer = \"adamw\" is not known", "did you mean \"adam\"", "rmsprop"});
  expect_rejected("lr-schedule = \"piecewise\"\nlr-boundaries = [100]\n"
                  "lr-values = [0.1]\n",
                  {"one more value than boundaries"});
  expect_rejected("lr-schedule = \"cosine\"\n", {"train.lr-schedule"});
  expect_rejected("lr-values = \"0.1\"\n", {"train.lr-values", "a list"});
  expect_rejected("[model]\nvgg-width = 0.0\n", {"model.vgg-width"});
}

BOOST_AUTO_TEST_CASE(command_line_overrides_the_file) {
  auto args = worker0;
  args.push_back("--train.batch-size=32");
  auto out = load(base() + "batch-size = 64\n", args);
  BOOST_REQUIRE(out.errors.empty());
  BOOST_TEST(out.setup.train.batch_size == 32);
}

BOOST_AUTO_TEST_CASE(unknown_key_suggests_the_right_one) {
  expect_rejected("batchsize = 64\n",
                  {"unknown key 'train.batchsize'", "did you mean 'train.batch-size'"});
  expect_rejected("[trian]\nmodel = \"softmax\"\n", {"unknown key 'trian.model'", "train.model"});
  expect_rejected("[middleman]\nheartbeat-intervall = 1s\n", {"middleman.heartbeat-interval"});
}

BOOST_AUTO_TEST_CASE(wrong_types_are_named) {
  expect_rejected("batch-size = \"64\"\n", {"train.batch-size", "wrong type", "an integer"});
  expect_error(load(base({{"cluster.request-timeout", "5"}}), worker0), {"a duration"});
  auto bad_list = "[cluster]\nchief = [\"127.0.0.1:7000\"]\nps = \"127.0.0.1:7001\"\n"
                  "worker = [\"127.0.0.1:7101\"]\n";
  auto out = load(bad_list, worker0);
  BOOST_TEST((out.what == load_outcome::action::fail));
  BOOST_TEST(out.errors[0].find("cluster.ps") != std::string::npos);
  BOOST_TEST(out.errors[0].find("list") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(cluster_errors) {
  const std::vector<std::string> chief0{"--job_name=chief", "--task_index=0"};
  expect_error(load(base({{"cluster.worker", "[]"}}), chief0), {"cluster.worker is empty"});
  expect_error(load(base({{"cluster.ps", "[\"127.0.0.1:7101\"]"}}), worker0),
               {"127.0.0.1:7101", "two tasks"});
  expect_error(load(base({{"cluster.ps", "[\"localhost\"]"}}), worker0),
               {"cluster.ps", "not host:port"});
  expect_error(load(base({{"cluster.ps", "[\"h:99999\"]"}}), worker0), {"outside 1..65535"});
  expect_error(load(base({{"cluster.chief", "[]"}}), worker0),
               {"cluster.chief must list exactly one"});
}

BOOST_AUTO_TEST_CASE(job_and_task_errors) {
  expect_error(load(base(), {"--job_name=worker", "--task_index=2"}),
               {"--task_index=2 is out of range", "valid: 0..1"});
  expect_error(load(base(), {"--job_name=master", "--task_index=0"}),
               {"--job_name=master", "ps, worker, chief or evaluator"});
  auto out = load(base(), {"--job_nme=ps"});
  BOOST_TEST((out.what == load_outcome::action::fail));
  BOOST_TEST(out.errors[0].find("job_name") != std::string::npos, out.errors[0]);
}

BOOST_AUTO_TEST_CASE(training_value_errors) {
  expect_rejected("model = \"softmx\"\n", {"did you mean \"softmax\""});
  expect_rejected(
    "model = \"cnm\"\n",
    {"train.model = \"cnm\" is not a known model; did you mean \"cnn\"? (known: "
     "softmax, mlp, cnn, vgg11, vgg16, vgg19, custom, lr, fm, mf, deepfm, synthetic, declared)"});
  expect_rejected("learning-rate = -0.1\n", {"train.learning-rate"});
  expect_rejected("last-step = -1\n", {"train.last-step"});
  expect_rejected("batch-size = 0\n", {"train.batch-size"});
  expect_rejected("mode = \"lockstep\"\n", {"train.mode", "async, sync"});
  expect_rejected("replicas-to-aggregate = 3\n",
                  {"train.replicas-to-aggregate = 3", "2 worker(s)"});
  expect_rejected("total-num-replicas = 3\n",
                  {"train.total-num-replicas = 3", "cluster.worker lists 2"});
  expect_rejected("on-worker-loss = \"ignore\"\n", {"train.on-worker-loss", "shrink"});
  expect_rejected("device = \"gpu0\"\n", {"train.device", "cuda:N"});
  // The syntax is checked everywhere; whether the device exists only by the
  // worker that uses it (tests/integration/node_cli_test.sh).
  BOOST_TEST(load(base() + "device = \"cuda:0\"\n", worker0).errors.empty());
  expect_rejected("worker-devices = [\"cpu\", \"cuda\"]\n", {"train.worker-devices[1]", "cuda:N"});
  expect_rejected("worker-devices = [\"cpu\", \"cpu\", \"cpu\"]\n",
                  {"train.worker-devices lists 3 devices"});
  expect_rejected("worker-batch-sizes = [100, 0]\n",
                  {"train.worker-batch-sizes[1] = 0 is out of range"});
  expect_rejected("gpu-memory-fraction = 0\n", {"train.gpu-memory-fraction must be in (0, 1]"});
}

// Values that used to crash a worker, stall a run or end it with a false
// success are refused before anything starts.
BOOST_AUTO_TEST_CASE(every_number_has_a_range) {
  expect_rejected("batch-size = 10000000\n",
                  {"train.batch-size = 10000000 is out of range", "1..65536"});
  // The fixture's training labels claim 1000 examples.
  expect_rejected("batch-size = 5000\n",
                  {"batch of worker:0 (5000) is larger than the 1000 training examples"});
  expect_rejected("epochs = 1e30\n", {"train.epochs", "1e6"});
  expect_rejected("last-step = 10000000000000\n", {"train.last-step"});
  expect_error(load(base({{"cluster.request-timeout", "1ns"}}), worker0),
               {"cluster.request-timeout = 0ms is out of range", "100ms to 24h"});
  expect_error(load(base({{"cluster.connect-timeout", "-5s"}}), worker0),
               {"cluster.connect-timeout"});
  expect_error(load(base({{"cluster.worker-wait-timeout", "48h"}}), worker0),
               {"cluster.worker-wait-timeout", "to 24h"});
  expect_rejected("optimizer = \"adam\"\nepsilon = -1.0\n",
                  {"epsilon must be 0 or a positive number"});
  expect_error(load(base({{"cluster.max-connections", "1"}}), worker0),
               {"cluster.max-connections = 1 is out of range", "(the cluster's tasks) to 65536"});
  expect_error(load(base({{"cluster.max-connections", "100000"}}), worker0),
               {"cluster.max-connections = 100000"});
}

// 0 is automatic: room for every task twice, and for tools.
BOOST_AUTO_TEST_CASE(max_connections_follows_the_cluster) {
  auto automatic = load(base(), worker0);
  BOOST_REQUIRE(automatic.errors.empty());
  auto tasks = 1 + automatic.setup.cluster.ps.size() + automatic.setup.cluster.worker.size();
  BOOST_TEST(automatic.setup.max_connections == 2 * tasks + 64);
  auto set = load(base({{"cluster.max-connections", "500"}}), worker0);
  BOOST_REQUIRE(set.errors.empty());
  BOOST_TEST(set.setup.max_connections == 500u);
}

// Each task's metrics port is its cluster port + 10000, on its host, unless
// the file names one; never a cluster port.
BOOST_AUTO_TEST_CASE(metrics_ports_derive_from_the_task_or_are_named) {
  auto worker = load(base(), {"--job_name=worker", "--task_index=1"});
  BOOST_REQUIRE(worker.errors.empty());
  BOOST_REQUIRE(worker.setup.metrics.has_value());
  BOOST_TEST(worker.setup.metrics->to_string() == "127.0.0.1:17102");
  auto ps = load(base(), {"--job_name=ps", "--task_index=0"});
  BOOST_TEST(ps.setup.metrics->to_string() == "127.0.0.1:17001");
  auto high = load(base({{"cluster.ps", "[\"127.0.0.1:60001\"]"}}), {"--job_name=ps"});
  BOOST_REQUIRE(high.errors.empty());
  BOOST_TEST(high.setup.metrics->port == 50001); // 60001 + 10000 passes 65535
  auto named = load(base() + "[metrics]\nport = 9400\naddress = \"0.0.0.0\"\n", worker0);
  BOOST_TEST(named.setup.metrics->to_string() == "0.0.0.0:9400");
  auto off = load(base(), {"--job_name=worker", "--metrics.port=0"});
  BOOST_TEST(!off.setup.metrics.has_value());
  BOOST_TEST(!off.setup.metrics_tls);
  // One process, every task: no cluster port to derive from.
  auto whole = load(base(), {});
  BOOST_REQUIRE(whole.errors.empty());
  BOOST_TEST(!whole.setup.metrics.has_value());
  // A derived port that is another task's cluster port: no metrics, said why.
  auto clash = load(base({{"cluster.ps", "[\"127.0.0.1:17101\"]"}}), worker0);
  BOOST_REQUIRE(clash.errors.empty());
  BOOST_TEST(!clash.setup.metrics.has_value());
  BOOST_TEST(clash.setup.metrics_note.find("the cluster port of 127.0.0.1:17101")
             != std::string::npos);
  expect_error(load(base(), {"--job_name=worker", "--metrics.port=7001"}),
               {"metrics.port = 7001 is the cluster port of 127.0.0.1:7001"});
  expect_error(load(base(), {"--job_name=worker", "--metrics.port=70000"}),
               {"metrics.port = 70000 is out of range"});
  expect_error(load(base(), {"--job_name=worker", "--metrics.port=-2"}), {"metrics.port = -2"});
}

BOOST_AUTO_TEST_CASE(missing_data_directory_is_named) {
  expect_error(load(base({{"train.data-dir", "\"/nonexistent/fmnist\""}}), worker0),
               {"train.data-dir", "/nonexistent/fmnist", "dataset-fashion-mnist"});
  // A PS reads no data, so it does not need the directory.
  auto out = load(base({{"train.data-dir", "\"/nonexistent/fmnist\""}}),
                  {"--job_name=ps", "--task_index=0"});
  BOOST_TEST(out.errors.empty());
}

BOOST_AUTO_TEST_CASE(syntax_errors_and_missing_files) {
  auto out = load(base() + "# not a comment in INI\n", worker0);
  BOOST_TEST((out.what == load_outcome::action::fail));
  BOOST_TEST(out.errors[0].find("syntax error") != std::string::npos);
  std::string missing = "--config-file=/nonexistent/troupe.conf";
  std::vector<char*> argv{const_cast<char*>("troupe-node"), missing.data()};
  node_config cfg;
  auto r = load_node_config(cfg, 2, argv.data());
  BOOST_TEST((r.what == load_outcome::action::fail));
  BOOST_TEST(r.errors[0].find("/nonexistent/troupe.conf") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(help_and_dump_config) {
  node_config cfg;
  auto help = help_text(cfg);
  for (auto key : {"train.batch-size", "cluster.connect-timeout", "job_name", "default"})
    BOOST_TEST(help.find(key) != std::string::npos, key);
  auto out = load(base(), {"--job_name=chief", "--task_index=0", "--dump-config"});
  BOOST_REQUIRE((out.what == load_outcome::action::dump_config));
  auto dumped = dump_config(*last_cfg, out.setup);
  BOOST_TEST(dumped.find("worker = [\"127.0.0.1:7101\", \"127.0.0.1:7102\"]") != std::string::npos);
  // The dump is itself a valid config file, small reals and lists included.
  BOOST_TEST(load(dumped, worker0).errors.empty());
  out = load(base() + "learning-rate = 1e-7\nlr-boundaries = [10]\nlr-values = [1.0, 0.5]\n",
             {"--job_name=chief", "--task_index=0", "--dump-config"});
  BOOST_REQUIRE(out.errors.empty());
  dumped = dump_config(*last_cfg, out.setup);
  auto again = load(dumped, worker0);
  BOOST_REQUIRE(again.errors.empty());
  BOOST_TEST(again.setup.train.optimizer.learning_rate.base == 1e-7);
  BOOST_TEST(again.setup.train.optimizer.learning_rate.values.size() == 2u);
}

BOOST_AUTO_TEST_CASE(shipped_examples_load) {
  const char* root = TROUPE_SOURCE_DIR;
  int seen = 0;
  for (auto& entry : fs::directory_iterator(fs::path(root) / "config" / "examples")) {
    if (entry.path().extension() != ".conf")
      continue;
    ++seen;
    std::ifstream in(entry.path());
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Point the example at the stand-in data directory.
    auto pos = text.find("data-dir");
    if (pos != std::string::npos)
      text.replace(pos, text.find('\n', pos) - pos,
                   "data-dir = \"" + (dir / "data").string() + "\"");
    // Examples with data of their own are checked as a ps task, which reads
    // no data (their files are made by a script); the rest as the chief.
    bool own_data = text.find("[data]") != std::string::npos;
    auto out = load(text, {own_data ? "--job_name=ps" : "--job_name=chief", "--task_index=0"});
    BOOST_TEST(out.errors.empty(), entry.path()
                                     << ": " << (out.errors.empty() ? "" : out.errors[0]));
  }
  BOOST_TEST(seen >= 2);
}

BOOST_AUTO_TEST_CASE(without_an_openssl_section_connections_are_plain) {
  auto out = load(base(), worker0);
  BOOST_REQUIRE(out.errors.empty());
  BOOST_TEST(!out.setup.tls);
}

BOOST_AUTO_TEST_CASE(tls_needs_certificate_key_and_ca_together) {
  auto out = load(base() + "[openssl]\ncertificate = \"c.pem\"\n", worker0);
  BOOST_TEST((out.what == load_outcome::action::fail));
  BOOST_REQUIRE_EQUAL(out.errors.size(), 2u);
  BOOST_TEST(out.errors[0].find("openssl.key is not set") != std::string::npos, out.errors[0]);
  BOOST_TEST(out.errors[1].find("openssl.cafile is not set") != std::string::npos, out.errors[1]);
  BOOST_TEST(out.errors[1].find("scripts/make-certs") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(tls_files_are_read_per_task_before_anything_starts) {
  auto certs = (dir / "certs").string();
  auto out = load(base() + "[openssl]\ncertificate = \"" + certs + "/{job}-{task}.pem\"\nkey = \""
                    + certs + "/{job}-{task}.key\"\ncafile = \"" + certs + "/ca.pem\"\n",
                  {"--job_name=worker", "--task_index=1"});
  BOOST_TEST((out.what == load_outcome::action::fail));
  BOOST_REQUIRE_EQUAL(out.errors.size(), 3u);
  BOOST_TEST(out.errors[0].find("cannot read '" + certs + "/worker-1.pem'") != std::string::npos,
             out.errors[0]);
  BOOST_TEST(out.errors[1].find(certs + "/worker-1.key") != std::string::npos, out.errors[1]);
  BOOST_TEST(out.errors[2].find(certs + "/ca.pem") != std::string::npos, out.errors[2]);
}

BOOST_AUTO_TEST_CASE(a_file_that_is_not_a_certificate_is_named) {
  std::ofstream(dir / "junk.pem") << "not a certificate\n";
  auto junk = (dir / "junk.pem").string();
  auto out = load(base() + "[openssl]\ncertificate = \"" + junk + "\"\nkey = \"" + junk
                    + "\"\ncafile = \"" + junk + "\"\n",
                  worker0);
  expect_error(out, {"openssl.certificate", junk, "is not a PEM certificate"});
}

BOOST_AUTO_TEST_CASE(a_key_or_section_given_twice_is_an_error) {
  expect_rejected("batch-size = 10\nbatch-size = 20\n",
                  {"train.batch-size is set twice", "first on line"});
  expect_rejected("[cluster]\nrequest-timeout = 5s\n", {"section [cluster] appears twice"});
  expect_error(load(base(), {"--job_name=worker", "--task_index=0", "--train.batch-size=5",
                             "--train.batch-size=6"}),
               {"--train.batch-size is given twice"});
}

BOOST_AUTO_TEST_CASE(nesting_and_string_length_are_bounded_before_parsing) {
  // 50,000 nested lists overflowed CAF's recursive parser's stack.
  expect_rejected("partitioners = " + std::string(50000, '[') + std::string(50000, ']') + "\n",
                  {"nested more than 4 deep"});
  expect_rejected("model = \"" + std::string(5000, 'x') + "\"\n", {"string of 5000 bytes", "4096"});
  expect_error(load(base(), {"--job_name=worker", "--task_index=0",
                             "--train.partitioners=" + std::string(100, '[')}),
               {"command line", "nested more than 4 deep"});
  expect_rejected("model = \"softmax\n", {"not closed"});
}

BOOST_AUTO_TEST_CASE(cafs_own_sections_are_ranged) {
  expect_rejected("[scheduler]\nmax-threads = 0\n",
                  {"scheduler.max-threads = 0 is out of range", "1..512"});
  expect_rejected("[scheduler]\nmax-threads = -1\n", {"scheduler.max-threads", "not negative"});
  expect_rejected("[scheduler]\nmax-throughput = 0\n", {"scheduler.max-throughput"});
  expect_rejected("[work-stealing]\nmoderate-steal-interval = 0\n",
                  {"work-stealing.moderate-steal-interval"});
  expect_rejected("[scheduler]\npolicy = 'fifo'\n", {"scheduler.policy", "'stealing', 'sharing'"});
  expect_rejected("[middleman]\nheartbeat-interval = 1ns\n",
                  {"middleman.heartbeat-interval = 1ns is out of range"});
  expect_rejected("[middleman]\nheartbeat-interval = 5s\n",
                  {"middleman.connection-timeout = 10s must be at least 3 x"});
  auto out = load(base() + "[scheduler]\nmax-threads = 4\npolicy = 'sharing'\n", worker0);
  BOOST_TEST(out.errors.empty(), (out.errors.empty() ? "" : out.errors[0]));
}

BOOST_AUTO_TEST_SUITE_END()
