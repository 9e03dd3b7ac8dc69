// Rules of the source tree (docs/architecture.md, "The tree"):
// - the folders are layers, lowest first (kLayers): a production file includes only its own
//   folder and the ones its layer may use, each listed before it, so no folder reaches back
//   up, and a layer uses only what it needs (the agent never a gRPC part: rpc, master, net);
//   nothing but the worker SDK includes CUDA or NCCL;
// - no include cycle between modules (a module: x.h with x.cc and its x_*.cc sources);
// - every module is named in its folder's README.
// These replace the old 500-line cap on a file, which split classes into "X, continued"
// files instead of making smaller ones (issue 31).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace ddprun {
namespace {

namespace fs = std::filesystem;

// The folders of production code, lowest layer first, each with the layers it may include
// (besides its own folder): only layers before it.
struct Layer {
  std::string folder;
  std::set<std::string> uses;
};
const std::vector<Layer> kLayers = {
    // base: files, fds, sockets, the clock, the event loop
    {"common", {}},
    // the rules of rounds, nodes and elections, shared by master and agents
    {"rendezvous", {"common"}},
    // facts about this host: accelerators, CPUs, names
    {"node", {"common"}},
    // torch's TCPStore: protocol, key-value store, the agent's server
    {"store", {"common", "node"}},
    // event records, run status, metrics, the HTTP page
    {"observability", {"common", "rendezvous"}},
    // gRPC and protobuf glue
    {"rpc", {"common", "rendezvous", "store", "observability"}},
    // the rendezvous master
    {"master", {"common", "rendezvous", "store", "observability", "rpc"}},
    // the network plugin: client, admin client, the hosted master, elected backends
    {"net", {"common", "rendezvous", "observability", "rpc", "master"}},
    // starting and killing workers
    {"agent/process", {"common"}},
    // workers' output and error files
    {"agent/logs", {"common"}},
    // hang detection and stack collection
    {"agent/hangs", {"common", "rendezvous", "agent/process", "agent/logs"}},
    // node health checks
    {"agent/health", {"common", "node", "agent/process"}},
    // the agent's rules and shell: no gRPC part (it speaks through RendezvousConnection)
    {"agent",
     {"common", "rendezvous", "node", "store", "observability", "agent/process", "agent/logs",
      "agent/hangs", "agent/health"}},
    // the command line and main
    {"launcher",
     {"common", "rendezvous", "node", "store", "observability", "net", "agent/process",
      "agent/logs", "agent/hangs", "agent/health", "agent"}},
    // the library workers link: not the launcher's side (master, net, agent, launcher)
    {"worker_sdk", {"common", "rendezvous", "rpc"}},
};

std::vector<std::string> LayerNames() {
  std::vector<std::string> names;
  for (const Layer& layer : kLayers) names.push_back(layer.folder);
  return names;
}

// The top folders of kLayers ("agent" for "agent/hangs"), in order.
std::vector<std::string> TopFolders() {
  std::vector<std::string> tops;
  for (const std::string& layer : LayerNames()) {
    const std::string top = layer.substr(0, layer.find('/'));
    if (std::find(tops.begin(), tops.end(), top) == tops.end()) tops.push_back(top);
  }
  return tops;
}

// Whether an #include's first folder is ddprun's: a layer's, or one of the folders that use
// them (an include of those from production code is a layer violation too).
bool IsOurs(const std::string& first) {
  const std::vector<std::string> tops = TopFolders();
  return std::find(tops.begin(), tops.end(), first) != tops.end() ||
         std::set<std::string>{"tests", "bench", "examples", "fuzz"}.count(first) > 0;
}

fs::path Root() { return fs::path(DDPRUN_SOURCE_DIR); }

bool IsSource(const fs::path& p) { return p.extension() == ".cc" || p.extension() == ".h"; }

// A file's layer: its folder below the root, with the worker SDK's subfolders as one.
std::string LayerOf(const std::string& relative) {
  if (absl::StartsWith(relative, "worker_sdk/")) return "worker_sdk";
  return fs::path(relative).parent_path().string();
}

int LayerIndex(const std::string& layer) {
  const std::vector<std::string> names = LayerNames();
  auto it = std::find(names.begin(), names.end(), layer);
  return it == names.end() ? -1 : static_cast<int>(it - names.begin());
}

// Every production file below `root`, relative to it: sources of the layers' folders, not
// their tests.
std::vector<std::string> ProductionFiles(const fs::path& root) {
  std::vector<std::string> files;
  for (const std::string& top : TopFolders()) {
    if (!fs::exists(root / top)) continue;
    for (auto it = fs::recursive_directory_iterator(root / top);
         it != fs::recursive_directory_iterator(); ++it) {
      if (it->is_directory() && it->path().filename() == "tests") {
        it.disable_recursion_pending();
      } else if (it->is_regular_file() && IsSource(it->path())) {
        files.push_back(fs::relative(it->path(), root).string());
      }
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

struct Include {
  std::string target;
  bool quoted = false;  // "..." (ddprun's and its libraries'), not <...> (the system's)
};

// Every `#include "..."` and `#include <...>` of `file`.
std::vector<Include> Includes(const fs::path& file) {
  std::vector<Include> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, "#include ")) continue;
    const std::string target = line.substr(9);
    if (target.size() > 2) {
      out.push_back({target.substr(1, target.find_first_of("\">", 1) - 1), target[0] == '"'});
    }
  }
  return out;
}

// What `file` (relative to `root`) includes that its layer may not: a layer not in its
// `uses`, CUDA outside the worker SDK. A folder not in kLayers is reported too.
std::vector<std::string> LayerViolations(const fs::path& root, const std::string& file) {
  std::vector<std::string> bad;
  const std::string layer = LayerOf(file);
  const int index = LayerIndex(layer);
  if (index < 0) return {absl::StrCat(file, ": its folder ", layer, " is in no layer")};
  for (const auto& [target, quoted] : Includes(root / file)) {
    const bool cuda = absl::StartsWith(target, "cuda") || absl::StartsWith(target, "nccl");
    if (cuda && layer != "worker_sdk") bad.push_back(absl::StrCat(file, " includes ", target));
    if (!quoted || !IsOurs(target.substr(0, target.find('/')))) continue;
    const std::string to = LayerOf(target);
    if (to != layer && kLayers[index].uses.count(to) == 0) {
      bad.push_back(absl::StrCat(file, " includes ", target, ": ", layer, " may not use ", to));
    }
  }
  return bad;
}

// The module a file belongs to: x.h, x.cc and x_*.cc of one folder are module "folder/x"
// (the longest x with a header); any other source is a module of its own.
std::string ModuleOf(const std::string& file, const std::set<std::string>& headers) {
  const std::string stem = (fs::path(file).parent_path() / fs::path(file).stem()).string();
  if (headers.count(stem)) return stem;
  std::string best;
  for (const std::string& h : headers) {
    if (absl::StartsWith(stem, h + "_") && h.size() > best.size() &&
        fs::path(h).parent_path() == fs::path(stem).parent_path()) {
      best = h;
    }
  }
  return best.empty() ? stem : best;
}

// "folder/x" of every header folder/x.h among `files`.
std::set<std::string> HeaderStems(const std::vector<std::string>& files) {
  std::set<std::string> stems;
  for (const std::string& f : files) {
    if (fs::path(f).extension() == ".h") {
      stems.insert((fs::path(f).parent_path() / fs::path(f).stem()).string());
    }
  }
  return stems;
}

using Graph = std::map<std::string, std::set<std::string>>;

// Module -> the modules it includes, over `files` (relative to `root`).
Graph ModuleGraph(const fs::path& root, const std::vector<std::string>& files) {
  const std::set<std::string> headers = HeaderStems(files);
  Graph graph;
  for (const std::string& f : files) {
    const std::string from = ModuleOf(f, headers);
    graph[from];
    for (const auto& [target, quoted] : Includes(root / f)) {
      if (!quoted || !fs::exists(root / target) || !IsSource(target)) continue;
      const std::string to = ModuleOf(target, headers);
      if (to != from) graph[from].insert(to);
    }
  }
  return graph;
}

// The cycles of `graph`: each strongly connected component of more than one module, its
// members joined by " <-> ".
std::vector<std::string> Cycles(const Graph& graph) {
  std::map<std::string, int> index, low;
  std::vector<std::string> stack;
  std::set<std::string> on_stack;
  std::vector<std::string> cycles;
  int next = 0;
  std::function<void(const std::string&)> visit = [&](const std::string& v) {
    index[v] = low[v] = next++;
    stack.push_back(v);
    on_stack.insert(v);
    auto edges = graph.find(v);
    if (edges != graph.end()) {
      for (const std::string& w : edges->second) {
        if (!index.count(w)) {
          visit(w);
          low[v] = std::min(low[v], low[w]);
        } else if (on_stack.count(w)) {
          low[v] = std::min(low[v], index[w]);
        }
      }
    }
    if (low[v] != index[v]) return;
    std::vector<std::string> component;
    std::string w;
    do {
      w = stack.back();
      stack.pop_back();
      on_stack.erase(w);
      component.push_back(w);
    } while (w != v);
    if (component.size() > 1) {
      std::sort(component.begin(), component.end());
      cycles.push_back(absl::StrJoin(component, " <-> "));
    }
  };
  for (const auto& [v, edges] : graph) {
    if (!index.count(v)) visit(v);
  }
  return cycles;
}

// The README that describes `layer`'s modules: its own, else its parent folder's.
fs::path ReadmeOf(const fs::path& root, const std::string& layer) {
  for (fs::path folder = layer; !folder.empty(); folder = folder.parent_path()) {
    if (fs::exists(root / folder / "README.md")) return root / folder / "README.md";
  }
  return {};
}

// Whether `text` names `word` in backquotes: `word` or `word.h` (`word.cc`, ...).
bool Mentions(const std::string& text, const std::string& word) {
  return absl::StrContains(text, "`" + word + "`") || absl::StrContains(text, "`" + word + ".");
}

// Modules whose name (a header's or a source's file name without extension) their folder's
// README does not mention in backquotes: `name`, or `path/name` from that README's folder.
std::vector<std::string> Unlisted(const fs::path& root, const std::vector<std::string>& files) {
  const std::set<std::string> headers = HeaderStems(files);
  std::set<std::string> modules;
  for (const std::string& f : files) modules.insert(ModuleOf(f, headers));
  std::vector<std::string> unlisted;
  for (const std::string& module : modules) {
    const fs::path readme = ReadmeOf(root, LayerOf(module + ".h"));
    std::ifstream in(readme);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string name = fs::path(module).filename().string();
    const std::string below =
        fs::relative(root / module, readme.empty() ? root : readme.parent_path()).string();
    if (!Mentions(text, name) && !Mentions(text, below)) {
      unlisted.push_back(absl::StrCat(module, " (", readme.empty() ? "no README" : "README.md",
                                      " of ", LayerOf(module + ".h"), ")"));
    }
  }
  return unlisted;
}

TEST(LayeringTest, EveryFileIncludesOnlyItsLayerAndTheOnesBelow) {
  const std::vector<std::string> files = ProductionFiles(Root());
  ASSERT_GT(files.size(), 100u) << "no sources found below " << Root();
  std::vector<std::string> bad;
  for (const std::string& f : files) {
    for (std::string& v : LayerViolations(Root(), f)) bad.push_back(std::move(v));
  }
  EXPECT_THAT(bad, ::testing::IsEmpty())
      << "layers, lowest first: " << absl::StrJoin(LayerNames(), ", ");
}

TEST(LayeringTest, EachLayerUsesOnlyLayersBeforeIt) {
  for (size_t i = 0; i < kLayers.size(); ++i) {
    for (const std::string& used : kLayers[i].uses) {
      const int at = LayerIndex(used);
      EXPECT_TRUE(at >= 0 && at < static_cast<int>(i)) << kLayers[i].folder << " uses " << used;
    }
  }
}

TEST(LayeringTest, NoModulesIncludeEachOther) {
  const Graph graph = ModuleGraph(Root(), ProductionFiles(Root()));
  ASSERT_GT(graph.size(), 100u);
  EXPECT_THAT(Cycles(graph), ::testing::IsEmpty());
}

TEST(LayeringTest, EveryModuleIsNamedInItsFoldersReadme) {
  EXPECT_THAT(Unlisted(Root(), ProductionFiles(Root())), ::testing::IsEmpty());
}

TEST(LayeringTest, TheChecksFindWhatTheyForbid) {
  // Else the tests above could pass on a reader that sees nothing.
  testing::TempDir dir;
  const fs::path root = dir.path();
  const auto put = [&](const std::string& name, const std::string& contents) {
    fs::create_directories((root / name).parent_path());
    dir.Write(name, contents);
  };
  put("common/a.h", "#include \"common/b.h\"\n");
  put("common/a_more.cc", "#include \"common/a.h\"\n");
  put("common/b.h", "#include <nccl.h>\n#include <net/if.h>\n");  // a system header
  put("common/b.cc", "#include \"common/b.h\"\n#include \"common/a.h\"\n");
  put("common/README.md", "- `a`: the first\n");
  put("agent/hangs/c.h", "#include \"launcher/d.h\"\n#include \"rendezvous/e.h\"\n");
  put("agent/README.md", "- `hangs/c`: hang detection\n");
  put("launcher/d.h", "#include \"agent/hangs/c.h\"\n");
  put("rendezvous/e.h", "");
  put("odd/f.h", "");

  const std::vector<std::string> files = ProductionFiles(root);
  EXPECT_THAT(LayerViolations(root, "agent/hangs/c.h"),
              ::testing::ElementsAre(
                  "agent/hangs/c.h includes launcher/d.h: agent/hangs may not use launcher"));
  EXPECT_THAT(LayerViolations(root, "common/b.h"),
              ::testing::ElementsAre("common/b.h includes nccl.h"));
  EXPECT_THAT(
      Cycles(ModuleGraph(root, files)),
      ::testing::UnorderedElementsAre("agent/hangs/c <-> launcher/d", "common/a <-> common/b"));
  EXPECT_THAT(
      Unlisted(root, files),
      ::testing::ElementsAre("common/b (README.md of common)", "launcher/d (no README of launcher)",
                             "rendezvous/e (no README of rendezvous)"));
  EXPECT_THAT(LayerViolations(root, "odd/f.h"),
              ::testing::ElementsAre("odd/f.h: its folder odd is in no layer"));
  put("worker_sdk/src/g.cc", "#include \"master/h.h\"\n#include \"rendezvous/e.h\"\n");
  put("master/h.h", "");
  EXPECT_THAT(LayerViolations(root, "worker_sdk/src/g.cc"),
              ::testing::ElementsAre(
                  "worker_sdk/src/g.cc includes master/h.h: worker_sdk may not use master"));
  // Below it, and still not its: the agent speaks to no gRPC part.
  put("agent/i.h", "#include \"net/j.h\"\n#include \"store/k.h\"\n");
  EXPECT_THAT(LayerViolations(root, "agent/i.h"),
              ::testing::ElementsAre("agent/i.h includes net/j.h: agent may not use net"));
}

}  // namespace
}  // namespace ddprun
