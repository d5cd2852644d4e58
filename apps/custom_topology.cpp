// Composing a topology with the Troupe library instead of troupe-node: three
// PS shards, and three workers of which one uses a larger batch, all in one
// actor system. The same spawn_* calls take remote handles to span nodes.
//   build/bin/troupe-custom-topology [DATA_DIR]
#include <iostream>

#include <caf/all.hpp>

#include "actors/cluster.hpp"

int main(int argc, char** argv) {
  troupe::training_settings settings;
  if (argc > 1)
    settings.data_dir = argv[1];
  settings.last_step = 2000;
  settings.log_interval = 500;
  troupe::runtime_settings runtime;

  caf::actor_system_config cfg;
  troupe::register_protocol(cfg); // every node, before the actor system exists
  caf::actor_system sys{cfg};

  troupe::training_data data;
  try {
    data = troupe::load_training_data(settings);
  } catch (const std::exception& e) {
    std::cerr << "custom-topology: " << e.what() << "\n";
    return 2;
  }
  std::vector<troupe::ps_shard_actor> shards;
  for (int32_t s = 0; s < 3; ++s)
    shards.push_back(troupe::spawn_ps_shard(sys, s, settings));
  troupe::training_result result;
  auto chief = troupe::spawn_chief(sys, settings, runtime, 3, shards, data.test,
                                   [&](const troupe::training_result& r) { result = r; });
  for (int32_t w = 0; w < 3; ++w) {
    auto worker_settings = settings;
    worker_settings.batch_size = w == 0 ? 200 : 100;
    troupe::spawn_worker(sys, w, 3, worker_settings, runtime, chief, shards, data.train);
  }
  {
    caf::scoped_actor self{sys};
    self->monitor(chief);
    self->receive([](const caf::down_msg&) {});
  }
  std::cout << result.to_json() << std::endl;
  return result.ok ? 0 : 1;
}
