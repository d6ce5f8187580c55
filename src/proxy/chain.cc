// recap proxy — the hash chain over a client's messages (chain.h).
#include "chain.h"

#include <cstring>

#include <nlohmann/json.hpp>

namespace recap_proxy {

namespace {

using Json = nlohmann::json;

// SplitMix64's finalizer: every input bit moves every output bit.
std::uint64_t Mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// Two independent 64-bit hashes of `bytes` (from two seeds) in one pass, eight bytes at a
// time, with the length folded in.
Link Hash2(std::uint64_t seed_a, std::uint64_t seed_b, std::string_view bytes) {
  const std::uint64_t n = bytes.size() * 0x9e3779b97f4a7c15ULL;
  std::uint64_t a = Mix(seed_a ^ n);
  std::uint64_t b = Mix(seed_b ^ n);
  std::size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, bytes.data() + i, 8);
    a = Mix(a ^ word) + 0x9e3779b97f4a7c15ULL;
    b = Mix(b ^ (word * 0xff51afd7ed558ccdULL)) + 0xc4ceb9fe1a85ec53ULL;
  }
  std::uint64_t tail = 0;
  std::memcpy(&tail, bytes.data() + i, bytes.size() - i);
  const std::uint64_t last = tail ^ (static_cast<std::uint64_t>(bytes.size() - i) << 56);
  return Link{Mix(a ^ last), Mix(b ^ (last * 0xff51afd7ed558ccdULL))};
}

Link HashLink(const Link& previous, std::string_view bytes) {
  return Hash2(previous.a ^ 0x243f6a8885a308d3ULL, previous.b ^ 0x13198a2e03707344ULL, bytes);
}

void DropMoved(Json& j) {
  if (j.is_object()) {
    j.erase("cache_control");
    for (auto& member : j.items()) DropMoved(member.value());
  } else if (j.is_array()) {
    for (Json& e : j) DropMoved(e);
  }
}

}  // namespace

Link ChainStart(std::string_view salt, std::string_view client, std::string_view format) {
  // Each part with its length before it: ("ab", "c") and ("a", "bc") differ.
  std::string text;
  for (std::string_view part : {salt, client, format}) {
    text += std::to_string(part.size());
    text += ':';
    text.append(part.data(), part.size());
  }
  return HashLink(Link{0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL}, text);
}

recap::Result<std::string> Canonical(std::string_view message_json, const std::string& where) {
  Json j = Json::parse(message_json.begin(), message_json.end(), nullptr, false);
  if (j.is_discarded()) {
    return recap::Status::InvalidArgument(where + " is not a JSON value");
  }
  DropMoved(j);
  // nlohmann's objects keep their keys sorted: dump() is the canonical text.
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

namespace {

const Link kDigestSeed{0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL};
const Link kRawSeed{0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL};

// The next link from a message's digest.
Link Follow(const Link& previous, const Link& digest) {
  char bytes[16];
  std::memcpy(bytes, &digest.a, 8);
  std::memcpy(bytes + 8, &digest.b, 8);
  return HashLink(previous, std::string_view(bytes, 16));
}

recap::Result<Link> DigestOf(std::string_view message_json, const std::string& where) {
  recap::Result<std::string> text = Canonical(message_json, where);
  if (!text.ok()) return text.status();
  return HashLink(kDigestSeed, *text);
}

}  // namespace

recap::Result<Link> ChainNext(const Link& previous, std::string_view message_json,
                              const std::string& where) {
  recap::Result<Link> digest = DigestOf(message_json, where);
  if (!digest.ok()) return digest.status();
  return Follow(previous, *digest);
}

DigestCache::DigestCache(std::size_t max_entries) : max_(max_entries) {}

std::size_t DigestCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.size();
}

recap::Result<std::vector<Link>> ChainOf(std::string_view salt, std::string_view client,
                                         std::string_view format,
                                         const std::vector<std::string_view>& messages,
                                         DigestCache* cache) {
  // Each message's digest: from the cache by its exact bytes, else made canonical now.
  std::vector<Link> digests(messages.size());
  std::vector<Link> raw;
  std::vector<std::size_t> missing;
  if (cache != nullptr) {
    raw.resize(messages.size());
    for (std::size_t i = 0; i < messages.size(); ++i) raw[i] = HashLink(kRawSeed, messages[i]);
    std::lock_guard<std::mutex> lock(cache->mu_);
    for (std::size_t i = 0; i < messages.size(); ++i) {
      const auto it = cache->map_.find(raw[i]);
      if (it == cache->map_.end()) {
        missing.push_back(i);
      } else {
        digests[i] = it->second;
      }
    }
  } else {
    for (std::size_t i = 0; i < messages.size(); ++i) missing.push_back(i);
  }
  for (const std::size_t i : missing) {
    recap::Result<Link> digest = DigestOf(messages[i], "messages[" + std::to_string(i) + "]");
    if (!digest.ok()) return digest.status();
    digests[i] = *digest;
  }
  if (cache != nullptr && !missing.empty()) {
    std::lock_guard<std::mutex> lock(cache->mu_);
    if (cache->map_.size() + missing.size() > cache->max_) cache->map_.clear();
    for (const std::size_t i : missing) cache->map_[raw[i]] = digests[i];
  }
  std::vector<Link> links;
  links.reserve(messages.size());
  Link link = ChainStart(salt, client, format);
  for (const Link& digest : digests) {
    link = Follow(link, digest);
    links.push_back(link);
  }
  return links;
}

Match ChainIndex::Find(
    const std::vector<Link>& links,
    const std::function<std::optional<Fingerprint>(std::size_t)>& reply_at) const {
  Match m;
  // The longest prefix of the request that is a session's latest request, followed by what
  // that session holds after it (nothing yet, or its reply).
  for (std::size_t n = links.size(); n-- > 0;) {
    const auto range = by_latest_.equal_range(links[n]);
    for (auto it = range.first; it != range.second; ++it) {
      const Latest_& latest = latest_.at(it->second);
      if (latest.reply) {
        // Answered: the request goes on from the reply the session holds (the same request
        // again, or another reply, is a regeneration or an edit: a fork).
        if (n + 1 >= links.size()) continue;
        const std::optional<Fingerprint> reply = reply_at(n + 1);
        if (!reply || *reply != *latest.reply) continue;
      }
      m.session = it->second;
      m.known = n + 1;
      m.answered = latest.reply.has_value();
      return m;
    }
  }
  for (const Link& link : links) {
    if (passed_.count(link) != 0) {
      m.why = "fork";
      return m;
    }
  }
  m.why = "new";
  return m;
}

void ChainIndex::Unlatest(const std::string& session) {
  const auto old = latest_.find(session);
  if (old != latest_.end()) {
    const auto range = by_latest_.equal_range(old->second.link);
    for (auto it = range.first; it != range.second; ++it) {
      if (it->second == session) {
        by_latest_.erase(it);
        break;
      }
    }
  }
}

void ChainIndex::Record(const std::string& session, const std::vector<Link>& links) {
  if (links.empty()) return;
  Unlatest(session);
  for (const Link& link : links) passed_.emplace(link, session);
  by_latest_.emplace(links.back(), session);
  latest_[session] = Latest_{links.back(), links.size(), std::nullopt};
}

void ChainIndex::Answered(const std::string& session, Fingerprint reply) {
  const auto it = latest_.find(session);
  if (it != latest_.end()) it->second.reply = std::move(reply);
}

void ChainIndex::Restore(const std::string& session, const Link& latest, std::size_t count,
                         std::optional<Fingerprint> reply) {
  Unlatest(session);
  passed_.emplace(latest, session);
  by_latest_.emplace(latest, session);
  latest_[session] = Latest_{latest, count, std::move(reply)};
}

std::optional<ChainIndex::Latest> ChainIndex::LatestOf(const std::string& session) const {
  const auto it = latest_.find(session);
  if (it == latest_.end()) return std::nullopt;
  return it->second;
}

}  // namespace recap_proxy
