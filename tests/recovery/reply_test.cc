// The reply test: a reply is sent only once what it reports is durable, and waits for nothing
// else. reply_driver holds the store's writes at a gate with a put (and the reserve it wakes)
// in the held batch and a reserve of an older, durable job beside it; it logs every completion
// that runs. The test kills it with SIGKILL while the write is held, recovers the directory,
// and checks that every job a completion reported survived (a reply sent too early names a job
// the directory does not have), and that the reserve of the durable job was answered while the
// write was held (a reply held back by an unrelated batch never is).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "broker/local/recovery.h"
#include "engine/engine.h"
#include "store/rocks_store.h"

namespace delayq {
namespace {

namespace fs = std::filesystem;

struct Line {
  std::string word;
  JobId id = 0;
};

std::vector<Line> read_log(const fs::path& path, bool* held) {
  std::vector<Line> lines;
  std::ifstream in(path);
  std::string text;
  *held = false;
  while (std::getline(in, text)) {
    std::istringstream words(text);
    Line line;
    words >> line.word >> line.id;
    if (line.word == "held") *held = true;
    lines.push_back(line);
  }
  return lines;
}

TEST(ReplyTest, RepliesWaitForWhatTheyReportAndNothingElseAcrossSigkill) {
  const fs::path root = fs::temp_directory_path() / ("delayq-reply-" + std::to_string(::getpid()));
  fs::remove_all(root);
  for (int round = 0; round < 3; ++round) {
    const fs::path dir = root / ("data-" + std::to_string(round));
    const fs::path log = root / ("log-" + std::to_string(round));
    fs::create_directories(dir);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::execl(DELAYQ_REPLY_DRIVER, "reply_driver", dir.c_str(), log.c_str(),
              static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    ASSERT_GT(pid, 0);
    bool held = false;
    std::vector<Line> lines;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!held && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      lines = read_log(log, &held);
    }
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(held) << "round " << round << ": the driver never reached its held write";

    auto store = store::RocksStore::open(dir.string());
    ASSERT_TRUE(store.is_ok()) << store.status().to_string();
    engine::ManualClock clock;
    engine::Engine engine(clock);
    ASSERT_TRUE(broker::local::recover(*store.value(), engine).is_ok());
    JobId durable = 0;
    bool durable_reserved = false;
    for (const Line& line : lines) {
      if (line.word == "held") continue;
      if (line.word == "durable") durable = line.id;
      if (line.word == "reserved" && line.id == durable) durable_reserved = true;
      EXPECT_TRUE(engine.peek(line.id).is_ok())
          << "round " << round << ": '" << line.word << " " << line.id
          << "' was reported, and the job is gone after the kill";
    }
    EXPECT_NE(durable, 0U);
    EXPECT_TRUE(durable_reserved) << "round " << round
                                  << ": the reserve of a durable job waited for another batch";
    EXPECT_EQ(lines.size(), 3U) << "durable, reserved, held: nothing of the held batch";
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace delayq
