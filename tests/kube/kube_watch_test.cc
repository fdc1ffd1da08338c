// Watch, reflector and informer against a real kube-apiserver: resumption from a resourceVersion,
// bookmarks, 410 Gone for a compacted resourceVersion, a relist after an apiserver restart and
// an etcd compaction, and an informer's store, indexes and handlers following adds, updates and
// deletes.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "kube/api_error.h"
#include "kube/informer.h"
#include "kube_test_util.h"

namespace tessera::testing {
namespace {

using kube::Json;
using kube::RestClient;

Json ConfigMap(const std::string& name, const std::map<std::string, std::string>& labels = {},
               const std::string& value = "v") {
  Json md = {{"name", name}};
  if (!labels.empty()) md["labels"] = labels;
  return {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", md}, {"data", {{"k", value}}}};
}

std::string Rv(const Json& obj) { return obj["metadata"]["resourceVersion"].get<std::string>(); }

TEST(KubeWatchTest, AWatchResumesFromTheLastResourceVersionAndSendsBookmarks) {
  KUBE_BED_OR_SKIP(bed);
  std::unique_ptr<RestClient> c = ClientFor(bed->admin_kubeconfig());
  ASSERT_NE(c, nullptr);
  const std::string ns = MakeNamespace(*c, "watch");
  absl::StatusOr<Json> a = c->Create(kube::ConfigMapsResource(), ns, ConfigMap("a"));
  ASSERT_TRUE(a.ok()) << a.status();

  // A watch from a's resourceVersion that the server ends after 1 s: b arrives, a does not.
  ASSERT_TRUE(c->Create(kube::ConfigMapsResource(), ns, ConfigMap("b")).ok());
  kube::ListOptions wo;
  wo.resource_version = Rv(*a);
  wo.timeout_seconds = 1;
  std::vector<std::string> seen;
  std::string last_rv;
  absl::Status s = c->Watch(kube::ConfigMapsResource(), ns, wo, [&](kube::WatchEvent&& ev) {
    seen.push_back(ev.type + " " + ev.object["metadata"]["name"].get<std::string>());
    last_rv = Rv(ev.object);
    return true;
  });
  ASSERT_TRUE(s.ok()) << s;  // ended by the server's timeout
  EXPECT_EQ(seen, (std::vector<std::string>{"ADDED b"}));

  // Resume from the last event: only what changed since.
  ASSERT_TRUE(c->MergePatch(kube::ConfigMapsResource(), ns, "a", {{"data", {{"k", "w"}}}}).ok());
  ASSERT_TRUE(c->Delete(kube::ConfigMapsResource(), ns, "b").ok());
  seen.clear();
  wo.resource_version = last_rv;
  s = c->Watch(kube::ConfigMapsResource(), ns, wo, [&](kube::WatchEvent&& ev) {
    seen.push_back(ev.type + " " + ev.object["metadata"]["name"].get<std::string>());
    return seen.size() < 2;  // stop once both are in
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(seen, (std::vector<std::string>{"MODIFIED a", "DELETED b"}));

  // Initial events end with a bookmark (WatchList), which carries a resourceVersion only.
  kube::ListOptions initial;
  initial.send_initial_events = true;
  initial.allow_watch_bookmarks = true;
  initial.resource_version_match = "NotOlderThan";
  initial.timeout_seconds = 30;
  seen.clear();
  bool saw_end = false;
  s = c->Watch(kube::ConfigMapsResource(), ns, initial, [&](kube::WatchEvent&& ev) {
    if (ev.type != "BOOKMARK") {
      seen.push_back(ev.type + " " + ev.object["metadata"]["name"].get<std::string>());
      return true;
    }
    EXPECT_FALSE(Rv(ev.object).empty());
    const Json ann = ev.object["metadata"].value("annotations", Json::object());
    saw_end = ann.value("k8s.io/initial-events-end", "") == "true";
    return !saw_end;
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(saw_end);
  EXPECT_NE(std::find(seen.begin(), seen.end(), "ADDED a"), seen.end());
  EXPECT_EQ(std::find(seen.begin(), seen.end(), "ADDED b"), seen.end());
}

TEST(KubeWatchTest, ACompactedResourceVersionIsGoneAndAWatchCanBeCancelled) {
  KUBE_BED_OR_SKIP(bed);
  std::unique_ptr<RestClient> c = ClientFor(bed->admin_kubeconfig());
  ASSERT_NE(c, nullptr);
  const std::string ns = MakeNamespace(*c, "gone");
  absl::StatusOr<Json> a = c->Create(kube::ConfigMapsResource(), ns, ConfigMap("a"));
  ASSERT_TRUE(a.ok());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(
        c->MergePatch(kube::ConfigMapsResource(), ns, "a", {{"data", {{"k", std::to_string(i)}}}})
            .ok());
  }
  // A restarted apiserver's watch cache starts at the current revision, and etcd forgets what
  // came before: a watch from a's resourceVersion can be served by neither (410).
  ASSERT_EQ(bed->RestartApiserver(), "");
  ASSERT_GT(bed->CompactEtcd(), 0);
  kube::ListOptions wo;
  wo.resource_version = Rv(*a);
  wo.timeout_seconds = 5;
  int events = 0;
  absl::Status s = c->Watch(kube::ConfigMapsResource(), ns, wo, [&](kube::WatchEvent&&) {
    ++events;
    return true;
  });
  EXPECT_TRUE(kube::IsApiGone(s)) << s;
  EXPECT_NE(s.message().find("watch configmaps " + ns), absl::string_view::npos) << s;
  EXPECT_EQ(events, 0);

  // Cancel from another thread ends a watch that would otherwise run 60 s.
  kube::WatchCancel cancel;
  // Two changes after the restart: a watch from the first sees the second at once.
  absl::StatusOr<Json> p1 =
      c->MergePatch(kube::ConfigMapsResource(), ns, "a", {{"data", {{"k", "p1"}}}});
  ASSERT_TRUE(p1.ok()) << p1.status();
  ASSERT_TRUE(c->MergePatch(kube::ConfigMapsResource(), ns, "a", {{"data", {{"k", "p2"}}}}).ok());
  wo.resource_version = Rv(*p1);
  wo.timeout_seconds = 60;
  absl::Notification started;
  std::thread t([&] {
    s = c->Watch(
        kube::ConfigMapsResource(), ns, wo,
        [&](kube::WatchEvent&&) {
          if (!started.HasBeenNotified()) started.Notify();
          return true;
        },
        &cancel);
  });
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(absl::Seconds(30)));
  cancel.Cancel();
  t.join();
  EXPECT_TRUE(absl::IsCancelled(s)) << s;
}

// What an informer's handlers saw, guarded for AwaitTrue.
struct Recorder {
  absl::Mutex mu;
  std::vector<std::string> events ABSL_GUARDED_BY(mu);
  kube::EventHandlers Handlers() {
    kube::EventHandlers h;
    h.on_add = [this](const kube::ObjectPtr& o, bool initial) {
      absl::MutexLock l(&mu);
      events.push_back(std::string(initial ? "initial " : "add ") + kube::KeyOf(*o));
    };
    h.on_update = [this](const kube::ObjectPtr& old_obj, const kube::ObjectPtr& o) {
      absl::MutexLock l(&mu);
      events.push_back("update " + kube::KeyOf(*o) + " " + (*old_obj)["data"].value("k", "") +
                       "->" + (*o)["data"].value("k", ""));
    };
    h.on_delete = [this](const kube::ObjectPtr& o) {
      absl::MutexLock l(&mu);
      events.push_back("delete " + kube::KeyOf(*o));
    };
    return h;
  }
  bool Has(const std::string& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return std::find(events.begin(), events.end(), e) != events.end();
  }
};

std::vector<std::string> IndexedNames(const kube::Store& s, const std::string& index,
                                      const std::string& value) {
  std::vector<kube::ObjectPtr> objs;
  EXPECT_TRUE(s.ByIndex(index, value, &objs).ok());
  std::vector<std::string> names;
  names.reserve(objs.size());
  for (const kube::ObjectPtr& o : objs) names.push_back((*o)["metadata"]["name"]);
  std::sort(names.begin(), names.end());
  return names;
}

TEST(KubeWatchTest, AnInformerFollowsAddsUpdatesAndDeletesWithIndexes) {
  KUBE_BED_OR_SKIP(bed);
  std::unique_ptr<RestClient> c = ClientFor(bed->admin_kubeconfig());
  ASSERT_NE(c, nullptr);
  const std::string ns = MakeNamespace(*c, "informer");
  ASSERT_TRUE(c->Create(kube::ConfigMapsResource(), ns, ConfigMap("pre", {{"team", "a"}})).ok());
  ASSERT_TRUE(c->Create(kube::ConfigMapsResource(), ns, ConfigMap("other")).ok());

  kube::ReflectorOptions ro;
  ro.type = kube::ConfigMapsResource();
  ro.ns = ns;
  ro.label_selector = "team";  // only labelled ones
  ro.page_size = 1;            // the first list takes pages
  kube::Informer inf(*c, ro);
  ASSERT_TRUE(inf.AddIndexer("team",
                             [](const Json& o) -> std::vector<std::string> {
                               return {o["metadata"]["labels"].value("team", "")};
                             })
                  .ok());
  Recorder rec;
  inf.AddEventHandlers(rec.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(absl::Seconds(30)));
  EXPECT_EQ(inf.store().ListKeys(), (std::vector<std::string>{ns + "/pre"}));

  ASSERT_TRUE(c->Create(kube::ConfigMapsResource(), ns, ConfigMap("x", {{"team", "a"}})).ok());
  ASSERT_TRUE(c->Create(kube::ConfigMapsResource(), ns, ConfigMap("y", {{"team", "b"}})).ok());
  ASSERT_TRUE(c->MergePatch(kube::ConfigMapsResource(), ns, "x",
                            {{"metadata", {{"labels", {{"team", "b"}}}}}, {"data", {{"k", "v2"}}}})
                  .ok());
  ASSERT_TRUE(c->Delete(kube::ConfigMapsResource(), ns, "pre").ok());
  const std::string last = "delete " + ns + "/pre";
  ASSERT_TRUE(AwaitTrue(
      rec.mu, [&] { return rec.Has(last); }, absl::Seconds(30)));
  {
    absl::MutexLock l(&rec.mu);
    EXPECT_EQ(rec.events, (std::vector<std::string>{"initial " + ns + "/pre", "add " + ns + "/x",
                                                    "add " + ns + "/y", "update " + ns + "/x v->v2",
                                                    "delete " + ns + "/pre"}));
  }
  EXPECT_EQ(inf.store().size(), 2u);
  EXPECT_EQ(IndexedNames(inf.store(), "team", "b"), (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(IndexedNames(inf.store(), "team", "a").empty());
  kube::ObjectPtr x = inf.store().Get(ns + "/x");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ((*x)["data"]["k"], "v2");
  EXPECT_EQ((*x)["kind"], "ConfigMap");
  EXPECT_EQ(inf.reflector().lists(), 1);
  inf.Stop();
}

TEST(KubeWatchTest, AReflectorRelistsWhenItsResourceVersionIsGone) {
  KUBE_BED_OR_SKIP(bed);
  std::unique_ptr<RestClient> c = ClientFor(bed->admin_kubeconfig());
  ASSERT_NE(c, nullptr);
  const std::string ns = MakeNamespace(*c, "relist");
  ASSERT_TRUE(c->Create(kube::ConfigMapsResource(), ns, ConfigMap("keep")).ok());
  ASSERT_TRUE(c->Create(kube::ConfigMapsResource(), ns, ConfigMap("drop")).ok());

  kube::ReflectorOptions ro;
  ro.type = kube::ConfigMapsResource();
  ro.ns = ns;
  ro.backoff_initial = absl::Milliseconds(200);
  ro.backoff_max = absl::Seconds(1);
  kube::Informer inf(*c, ro);
  Recorder rec;
  inf.AddEventHandlers(rec.Handlers());
  inf.Start();
  ASSERT_TRUE(inf.WaitForSync(absl::Seconds(30)));
  const std::string synced_rv = inf.reflector().last_resource_version();

  // The apiserver goes away. Meanwhile, through a second apiserver on the same etcd, objects
  // change and etcd compacts its history past the reflector's resourceVersion. The first
  // apiserver comes back with a watch cache that starts after the changes: resuming from the
  // reflector's resourceVersion is refused with 410, and only a relist can catch up.
  std::string second;
  ASSERT_EQ(bed->StartSecondApiserver(&second), "");
  const std::string kc2 = bed->dir() + "/second.kubeconfig";
  bed->WriteKubeconfig(kc2, std::string("token: ") + KubeBed::kAdminToken, "", second);
  std::unique_ptr<RestClient> c2 = ClientFor(kc2);
  ASSERT_NE(c2, nullptr);
  bed->StopApiserver();
  ASSERT_TRUE(c2->Delete(kube::ConfigMapsResource(), ns, "drop").ok());
  ASSERT_TRUE(c2->Create(kube::ConfigMapsResource(), ns, ConfigMap("new")).ok());
  ASSERT_TRUE(
      c2->MergePatch(kube::ConfigMapsResource(), ns, "keep", {{"data", {{"k", "v2"}}}}).ok());
  ASSERT_GT(bed->CompactEtcd(), 0);
  ASSERT_EQ(bed->StartApiserverAgain(), "");

  const std::string want_update = "update " + ns + "/keep v->v2";
  ASSERT_TRUE(AwaitTrue(
      rec.mu,
      [&] {
        return rec.Has(want_update) && rec.Has("delete " + ns + "/drop") &&
               rec.Has("add " + ns + "/new");
      },
      absl::Seconds(60)))
      << "the informer did not catch up after the restart";
  // The resumed watch from the old resourceVersion was refused with 410 and the reflector
  // listed again: the changes came through that list.
  EXPECT_GE(inf.reflector().gone(), 1);
  EXPECT_GE(inf.reflector().lists(), 2);
  EXPECT_NE(inf.reflector().last_resource_version(), synced_rv);
  std::vector<std::string> keys = inf.store().ListKeys();
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<std::string>{ns + "/keep", ns + "/new"}));

  // And it keeps following: a change after the relist arrives as a watch event.
  ASSERT_TRUE(c->Delete(kube::ConfigMapsResource(), ns, "new").ok());
  ASSERT_TRUE(AwaitTrue(
      rec.mu, [&] { return rec.Has("delete " + ns + "/new"); }, absl::Seconds(30)));
  inf.Stop();
}

}  // namespace
}  // namespace tessera::testing
