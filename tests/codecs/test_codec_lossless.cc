// SPEC R13.2: lossless means lossless. Numbers and unknown fields travel byte for byte through
// import (decode), the store (the body form the SQLite and PostgreSQL stores keep) and export
// (encode), in every format: 1E5 stays 1E5, 1.50 stays 1.50, -0 stays -0, and an integer of
// thirty digits keeps every one of them.
//
// The property cases write each document in the order the encoder writes its members (the
// modelled members first, then the unknown ones), compact, with strings escaped the way recap
// escapes them; then the text that comes back must be the text that went in, byte for byte.
// A failure prints its case seed; RECAP_SEED=<seed> replays that case alone.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "recap/codec.h"

#include "recap_internal/body_codec.h"
#include "support/generator.h"

namespace {

using recap::Conversation;
using recap::Message;
using recap::Result;
using recap_test::Rng;

const std::vector<std::string> kNumbers = {"123456789012345678901234567890",
                                           "3.141592653589793238462643383279",
                                           "1E5",
                                           "-0",
                                           "1.50",
                                           "1e-7",
                                           "-0.0",
                                           "-123456789012345678901234567890",
                                           "-9223372036854775809",
                                           "18446744073709551616",
                                           "9007199254740993",
                                           "0",
                                           "-1",
                                           "1e+5",
                                           "1E-05",
                                           "0.1e1",
                                           "100000.0",
                                           "2.5e-324",
                                           "1e999999",
                                           "-1E-999999",
                                           "0.000000000000000000000000000001"};

struct Format {
  const char* name;
  std::function<Result<Conversation>(std::string_view)> decode;
  std::function<Result<std::string>(const Conversation&)> encode;
};

const std::vector<Format>& Formats() {
  using namespace recap;
  static const std::vector<Format> formats = {
      {"native", [](std::string_view j) { return native::DecodeMessages(j); },
       [](const Conversation& c) { return native::EncodeMessages(c); }},
      {"openai_chat", [](std::string_view j) { return openai_chat::DecodeMessages(j); },
       [](const Conversation& c) { return openai_chat::EncodeMessages(c); }},
      {"anthropic", [](std::string_view j) { return anthropic::DecodeMessages(j); },
       [](const Conversation& c) { return anthropic::EncodeMessages(c); }},
      {"openai_responses", [](std::string_view j) { return openai_responses::DecodeMessages(j); },
       [](const Conversation& c) { return openai_responses::EncodeMessages(c); }},
  };
  return formats;
}

const Format& FormatNamed(std::string_view name) {
  for (const Format& f : Formats()) {
    if (name == f.name) return f;
  }
  throw std::logic_error("no format " + std::string(name));
}

// Each message through the body form the stores keep, and back.
Message ThroughBody(const Message& m) {
  std::string body;
  recap::internal::EncodeBody(m, body);
  Result<Message> back = recap::internal::DecodeBody(body);
  if (!back.ok()) throw std::runtime_error(back.status().message());
  return *back;
}

Conversation ThroughStore(const Conversation& c) {
  Conversation out;
  if (c.instructions) out.instructions = ThroughBody(*c.instructions);
  for (const Message& m : c.messages) out.messages.push_back(ThroughBody(m));
  return out;
}

// import -> store -> export, and the same through recap's own JSON form on the way (export
// as native, import that).
struct Trip {
  std::string direct;
  std::string via_native;
  std::string error;
};

Trip RoundTrip(const Format& format, const std::string& doc) {
  Trip trip;
  Result<Conversation> conv = format.decode(doc);
  if (!conv.ok()) {
    trip.error = "decode: " + conv.status().message();
    return trip;
  }
  const Conversation stored = ThroughStore(*conv);
  Result<std::string> direct = format.encode(stored);
  if (!direct.ok()) {
    trip.error = "encode: " + direct.status().message();
    return trip;
  }
  trip.direct = *direct;
  Result<std::string> native = recap::native::EncodeMessages(stored);
  if (!native.ok()) {
    trip.error = "native encode: " + native.status().message();
    return trip;
  }
  Result<Conversation> again = recap::native::DecodeMessages(*native);
  if (!again.ok()) {
    trip.error = "native decode: " + again.status().message();
    return trip;
  }
  Result<std::string> via = format.encode(ThroughStore(*again));
  if (!via.ok()) {
    trip.error = "encode after native: " + via.status().message();
    return trip;
  }
  trip.via_native = *via;
  return trip;
}

// Where two texts first differ, with some context, for a failure message.
std::string FirstDifference(const std::string& want, const std::string& got) {
  std::size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  const std::size_t from = i > 60 ? i - 60 : 0;
  return "first difference at byte " + std::to_string(i) + "\n  want: …" + want.substr(from, 160) +
         "\n  got:  …" + got.substr(from, 160);
}

// ---- The documents of the fixed cases ------------------------------------------------------

std::string Quoted(const std::string& json_text) {
  std::string out = "\"";
  for (char c : json_text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// One document of each format with the number `n` in an unknown field of every kind of
// object, inside opaque payloads and inside tool-call arguments.
std::string FixedDocument(std::string_view format, const std::string& n) {
  const std::string args = Quoted("{\"n\":" + n + ",\"list\":[" + n + "," + n + "]}");
  if (format == "openai_chat") {
    return "[{\"role\":\"system\",\"content\":\"be brief\",\"n\":" + n +
           "},{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\",\"n\":" + n +
           "},{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:,\",\"n\":" + n +
           "}}],\"n\":" + n +
           "},{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":"
           "\"function\",\"function\":{\"name\":\"f\",\"arguments\":" +
           args + ",\"n\":" + n + "},\"n\":" + n + "}],\"n\":" + n +
           "},{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"ok\",\"n\":" + n + "}]";
  }
  if (format == "anthropic") {
    return "[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\",\"n\":" + n +
           "},{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"n\":" + n + "}}],\"n\":" + n +
           "},{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"t\","
           "\"signature\":\"s\",\"n\":" +
           n + "},{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"f\",\"input\":{\"n\":" + n +
           ",\"list\":[" + n + "," + n + "]},\"n\":" + n + "}],\"n\":" + n +
           "},{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t1\","
           "\"content\":[{\"type\":\"text\",\"text\":\"ok\",\"n\":" +
           n + "}],\"n\":" + n + "}]}]";
  }
  if (format == "openai_responses") {
    return "[{\"role\":\"system\",\"content\":\"be brief\",\"n\":" + n +
           "},{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"hi\",\"n\":" + n +
           "}],\"n\":" + n +
           "},{\"type\":\"reasoning\",\"id\":\"rs_1\",\"summary\":[],"
           "\"encrypted_content\":\"e\",\"n\":" +
           n +
           "},{\"type\":\"function_call\",\"call_id\":\"c1\",\"name\":\"f\",\"arguments\":" + args +
           ",\"n\":" + n +
           "},{\"type\":\"function_call_output\",\"call_id\":\"c1\",\"output\":\"ok\",\"n\":" + n +
           "},{\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"done\","
           "\"annotations\":[],\"n\":" +
           n + "}],\"n\":" + n + "}]";
  }
  // native
  return "{\"format\":\"recap\",\"version\":1,\"instructions\":null,\"messages\":[{\"id\":\"m1\","
         "\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"hi\",\"extra\":{\"n\":" +
         n +
         "}},{\"type\":\"opaque\",\"kind\":\"image\",\"payload\":{\"type\":\"image\",\"n\":" + n +
         "}}],\"extra\":{\"n\":" + n +
         "}},{\"id\":\"m2\",\"role\":\"assistant\",\"parts\":[{\"type\":\"tool_call\",\"id\":"
         "\"c1\","
         "\"name\":\"f\",\"arguments\":" +
         args + ",\"extra\":{\"n\":" + n +
         "}}]},{\"id\":\"m3\",\"role\":\"tool\",\"parts\":[{\"type\":\"tool_result\",\"call_id\":"
         "\"c1\",\"content\":[{\"type\":\"text\",\"text\":\"ok\",\"extra\":{\"n\":" +
         n + "}}],\"extra\":{\"n\":" + n + "}}]}]}";
}

}  // namespace

TEST_CASE("R13.2 numbers come back byte for byte through decode, the store and encode") {
  for (const Format& format : Formats()) {
    for (const std::string& n : kNumbers) {
      INFO(format.name << ", the number " << n);
      const std::string doc = FixedDocument(format.name, n);
      const Trip trip = RoundTrip(format, doc);
      REQUIRE(trip.error.empty());
      CHECK(trip.direct == doc);
      CHECK(trip.via_native == doc);
    }
  }
}

TEST_CASE("R13.2 the decoded model holds each number's text as written") {
  Result<Message> m = recap::openai_chat::DecodeMessage(
      R"({"role":"user","content":"x","a":1E5,"b":[1.50,-0],"c":{"d":123456789012345678901234567890}})");
  REQUIRE(m.ok());
  CHECK(m->extra == R"({"a":1E5,"b":[1.50,-0],"c":{"d":123456789012345678901234567890}})");
  Result<Message> tool = recap::anthropic::DecodeMessage(
      R"({"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"x":3.141592653589793238462643383279,"y":-0.0}}]})");
  REQUIRE(tool.ok());
  CHECK(std::get<recap::ToolCall>(tool->parts[0]).arguments ==
        R"({"x":3.141592653589793238462643383279,"y":-0.0})");
  // An opaque payload that holds such numbers is embedded in the native form, not escaped
  // into a string: its value serializes back to the same bytes.
  Result<Message> block = recap::anthropic::DecodeMessage(
      R"({"role":"user","content":[{"type":"image","source":{"n":1E5}}]})");
  REQUIRE(block.ok());
  Result<std::string> native = recap::native::EncodeMessage(*block);
  REQUIRE(native.ok());
  CHECK_THAT(*native, Catch::Contains(R"("payload":{"type":"image","source":{"n":1E5}})"));
}

// ---- Property cases ------------------------------------------------------------------------

namespace {

constexpr std::uint64_t kRunSeeds[] = {1, 7, 42, 0xC0DEC, 20250101};
constexpr std::size_t kCasesPerSeed = 250;  // x 6 run seeds x 4 formats = 6,000 documents

std::optional<std::uint64_t> ReplaySeed() {
  const char* s = std::getenv("RECAP_SEED");
  if (s == nullptr || *s == '\0') return std::nullopt;
  return std::strtoull(s, nullptr, 0);
}

// A JSON string literal of `text` as recap writes it: '"' and '\' escaped, the control
// characters as \b \f \n \r \t or \u00xx, everything else as it is.
std::string JsonString(std::string_view text) {
  std::string out = "\"";
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string Digits(Rng& rng, std::size_t n, bool leading_nonzero) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    const char lo = i == 0 && leading_nonzero ? '1' : '0';
    s += static_cast<char>(lo + rng.Below(static_cast<std::uint64_t>('9' - lo + 1)));
  }
  return s;
}

std::string RandomNumber(Rng& rng) {
  if (rng.OneIn(4)) return rng.Pick(kNumbers);
  std::string s = rng.OneIn(3) ? "-" : "";
  const std::size_t int_digits = rng.OneIn(200) ? 10000 : rng.Size(1, 40);
  s += rng.OneIn(5) ? "0" : Digits(rng, int_digits, true);
  if (rng.OneIn(2)) s += "." + Digits(rng, rng.Size(1, 30), false);
  if (rng.OneIn(3)) {
    s += rng.OneIn(2) ? "e" : "E";
    if (rng.OneIn(2)) s += rng.OneIn(2) ? "+" : "-";
    s += Digits(rng, rng.Size(1, 7), false);
  }
  return s;
}

std::string RandomKey(Rng& rng, std::size_t i) {
  // "u_" keeps unknown keys clear of every modelled member; `i` keeps them unique.
  return JsonString("u_" +
                    recap_test::RandomText(rng, rng.Size(0, 6), recap_test::TextStyle::kAnyMix) +
                    "_" + std::to_string(i));
}

std::string RandomValue(Rng& rng, int depth) {
  const std::uint64_t pick = rng.Below(depth >= 4 ? 8 : 11);
  switch (pick) {
    case 0:
    case 1:
    case 2:
    case 3: return RandomNumber(rng);
    case 4:
    case 5:
      return JsonString(recap_test::RandomText(
          rng, rng.Size(0, 24),
          rng.OneIn(2) ? recap_test::TextStyle::kAnyMix : recap_test::TextStyle::kCode));
    case 6: return rng.OneIn(2) ? "true" : "false";
    case 7: return "null";
    case 8:
    case 9: {
      std::string a = "[";
      const std::size_t n = rng.Size(0, 4);
      for (std::size_t i = 0; i < n; ++i) a += (i ? "," : "") + RandomValue(rng, depth + 1);
      return a + "]";
    }
    default: {
      std::string o = "{";
      const std::size_t n = rng.Size(0, 4);
      for (std::size_t i = 0; i < n; ++i) {
        o += (i ? "," : "") + RandomKey(rng, i) + ":" + RandomValue(rng, depth + 1);
      }
      return o + "}";
    }
  }
}

// ",<key>:<value>..." — zero to three unknown members, for the end of an object.
std::string Unknown(Rng& rng, std::size_t max = 3) {
  std::string s;
  const std::size_t n = rng.Size(0, max);
  for (std::size_t i = 0; i < n; ++i) s += "," + RandomKey(rng, i) + ":" + RandomValue(rng, 1);
  return s;
}

// A JSON object text with one or more unknown members (a native `extra`), or "".
std::string NativeExtra(Rng& rng) {
  const std::string u = Unknown(rng);
  return u.empty() ? std::string() : ",\"extra\":{" + u.substr(1) + "}";
}

std::string Text(Rng& rng) {
  return JsonString(recap_test::RandomText(rng, rng.Size(0, 30), recap_test::TextStyle::kAnyMix));
}

// An opaque block's members after its type (an image's source, a reasoning item's fields).
std::string OpaqueBody(Rng& rng) {
  std::string s = ",\"data\":" + RandomValue(rng, 1);
  return s + Unknown(rng);
}

std::string ArgumentsValue(Rng& rng) {
  std::string o = "{";
  const std::size_t n = rng.Size(0, 4);
  for (std::size_t i = 0; i < n; ++i) {
    o += (i ? "," : "") + RandomKey(rng, i) + ":" + RandomValue(rng, 1);
  }
  return o + "}";
}

std::string ChatDocument(Rng& rng) {
  std::vector<std::string> messages;
  if (rng.OneIn(2)) {
    messages.push_back("{\"role\":\"system\",\"content\":" + Text(rng) + Unknown(rng) + "}");
  }
  const std::size_t turns = rng.Size(1, 3);
  int call = 0;
  for (std::size_t t = 0; t < turns; ++t) {
    std::string user = "{\"role\":\"user\",\"content\":";
    if (rng.OneIn(2)) {
      user += Text(rng);
    } else {
      user += "[{\"type\":\"text\",\"text\":" + Text(rng) + Unknown(rng) + "}";
      if (rng.OneIn(2)) user += ",{\"type\":\"image_url\"" + OpaqueBody(rng) + "}";
      user += "]";
    }
    messages.push_back(user + Unknown(rng) + "}");
    if (rng.OneIn(2)) {
      const std::string id = "c" + std::to_string(++call);
      messages.push_back("{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"" +
                         id +
                         "\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":" +
                         JsonString(ArgumentsValue(rng)) + Unknown(rng) + "}" + Unknown(rng) +
                         "}]" + Unknown(rng) + "}");
      messages.push_back("{\"role\":\"tool\",\"tool_call_id\":\"" + id +
                         "\",\"content\":" + Text(rng) + Unknown(rng) + "}");
    }
    messages.push_back("{\"role\":\"assistant\",\"content\":" + Text(rng) + Unknown(rng) + "}");
  }
  std::string doc = "[";
  for (std::size_t i = 0; i < messages.size(); ++i) doc += (i ? "," : "") + messages[i];
  return doc + "]";
}

std::string AnthropicDocument(Rng& rng) {
  std::vector<std::string> messages;
  const std::size_t turns = rng.Size(1, 3);
  int call = 0;
  for (std::size_t t = 0; t < turns; ++t) {
    std::string user = "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":" + Text(rng) +
                       Unknown(rng) + "}";
    if (rng.OneIn(2)) user += ",{\"type\":\"image\"" + OpaqueBody(rng) + "}";
    messages.push_back(user + "]" + Unknown(rng) + "}");
    if (rng.OneIn(2)) {
      const std::string id = "t" + std::to_string(++call);
      std::string assistant = "{\"role\":\"assistant\",\"content\":[";
      if (rng.OneIn(2)) assistant += "{\"type\":\"thinking\"" + OpaqueBody(rng) + "},";
      assistant += "{\"type\":\"tool_use\",\"id\":\"" + id +
                   "\",\"name\":\"f\",\"input\":" + ArgumentsValue(rng) + Unknown(rng) + "}]" +
                   Unknown(rng) + "}";
      messages.push_back(assistant);
      messages.push_back(
          "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\","
          "\"tool_use_id\":\"" +
          id + "\",\"content\":[{\"type\":\"text\",\"text\":" + Text(rng) + Unknown(rng) + "}]" +
          Unknown(rng) + "}]}");
    }
    messages.push_back("{\"role\":\"assistant\",\"content\":" + Text(rng) + Unknown(rng) + "}");
  }
  std::string doc = "[";
  for (std::size_t i = 0; i < messages.size(); ++i) doc += (i ? "," : "") + messages[i];
  return doc + "]";
}

std::string ResponsesDocument(Rng& rng) {
  std::vector<std::string> items;
  if (rng.OneIn(2)) {
    items.push_back("{\"role\":\"system\",\"content\":" + Text(rng) + Unknown(rng) + "}");
  }
  const std::size_t turns = rng.Size(1, 3);
  int call = 0;
  for (std::size_t t = 0; t < turns; ++t) {
    items.push_back("{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":" +
                    Text(rng) + Unknown(rng) + "}]" + Unknown(rng) + "}");
    if (rng.OneIn(2)) {
      const std::string id = "c" + std::to_string(++call);
      if (rng.OneIn(2)) items.push_back("{\"type\":\"reasoning\"" + OpaqueBody(rng) + "}");
      items.push_back("{\"type\":\"function_call\",\"call_id\":\"" + id +
                      "\",\"name\":\"f\",\"arguments\":" + JsonString(ArgumentsValue(rng)) +
                      Unknown(rng) + "}");
      items.push_back("{\"type\":\"function_call_output\",\"call_id\":\"" + id +
                      "\",\"output\":" + Text(rng) + Unknown(rng) + "}");
    }
    if (rng.OneIn(3)) items.push_back("{\"type\":\"web_search_call\"" + OpaqueBody(rng) + "}");
    items.push_back("{\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":" +
                    Text(rng) + Unknown(rng) + "}]" + Unknown(rng) + "}");
  }
  std::string doc = "[";
  for (std::size_t i = 0; i < items.size(); ++i) doc += (i ? "," : "") + items[i];
  return doc + "]";
}

std::string NativeDocument(Rng& rng) {
  std::vector<std::string> messages;
  const std::size_t turns = rng.Size(1, 3);
  int n = 0;
  auto id = [&] { return "\"id\":\"m" + std::to_string(++n) + "\","; };
  for (std::size_t t = 0; t < turns; ++t) {
    std::string user = "{" + id() +
                       "\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":" + Text(rng) +
                       NativeExtra(rng) + "}";
    if (rng.OneIn(2)) {
      user += ",{\"type\":\"opaque\",\"kind\":\"image\",\"payload\":{\"type\":\"image\"" +
              OpaqueBody(rng) + "}}";
    }
    messages.push_back(user + "]" + NativeExtra(rng) + "}");
    if (rng.OneIn(2)) {
      const std::string call = "c" + std::to_string(n);
      messages.push_back(
          "{" + id() + "\"role\":\"assistant\",\"parts\":[{\"type\":\"tool_call\",\"id\":\"" +
          call + "\",\"name\":\"f\",\"arguments\":" + JsonString(ArgumentsValue(rng)) +
          NativeExtra(rng) + "}]" + NativeExtra(rng) + "}");
      messages.push_back(
          "{" + id() + "\"role\":\"tool\",\"parts\":[{\"type\":\"tool_result\",\"call_id\":\"" +
          call + "\",\"content\":[{\"type\":\"text\",\"text\":" + Text(rng) + NativeExtra(rng) +
          "}]" + NativeExtra(rng) + "}]" + NativeExtra(rng) + "}");
    }
  }
  std::string doc = "{\"format\":\"recap\",\"version\":1,\"instructions\":null,\"messages\":[";
  for (std::size_t i = 0; i < messages.size(); ++i) doc += (i ? "," : "") + messages[i];
  return doc + "]}";
}

std::string GenerateDocument(std::string_view format, std::uint64_t seed) {
  Rng rng(seed);
  if (format == "openai_chat") return ChatDocument(rng);
  if (format == "anthropic") return AnthropicDocument(rng);
  if (format == "openai_responses") return ResponsesDocument(rng);
  return NativeDocument(rng);
}

}  // namespace

TEST_CASE("R13.2 property: generated documents come back byte for byte, every format") {
  std::vector<std::uint64_t> seeds;
  if (auto replay = ReplaySeed()) {
    seeds.push_back(*replay);
  } else {
    std::vector<std::uint64_t> runs(std::begin(kRunSeeds), std::end(kRunSeeds));
    runs.push_back(std::random_device{}());
    std::cerr << "[lossless] random run seed " << runs.back()
              << " (a failure prints its case seed; replay it with RECAP_SEED=<seed>)\n";
    for (std::uint64_t run : runs) {
      for (std::size_t i = 0; i < kCasesPerSeed; ++i) seeds.push_back(recap_test::MixSeed(run, i));
    }
  }
  for (const Format& format : Formats()) {
    std::size_t failures = 0;
    for (std::uint64_t seed : seeds) {
      const std::string doc = GenerateDocument(format.name, seed);
      const Trip trip = RoundTrip(format, doc);
      std::string problem;
      if (!trip.error.empty()) {
        problem = trip.error;
      } else if (trip.direct != doc) {
        problem = "direct: " + FirstDifference(doc, trip.direct);
      } else if (trip.via_native != doc) {
        problem = "through the native form: " + FirstDifference(doc, trip.via_native);
      }
      if (!problem.empty() && ++failures <= 3) {
        FAIL_CHECK(format.name << " RECAP_SEED=" << seed << ": " << problem);
      }
    }
    INFO(format.name << ": " << failures << " of " << seeds.size() << " documents changed");
    CHECK(failures == 0);
  }
}

TEST_CASE("R13.2 the store's body form keeps extra and payload texts byte for byte") {
  Message m = Message::UserText("x");
  m.extra = R"({ "a" : 1E5 ,"b":[-0, 1.50]})";  // any text: the body form does not parse it
  std::get<recap::Text>(m.parts[0]).extra = R"({"n":123456789012345678901234567890})";
  m.parts.emplace_back(recap::Opaque{"image",
                                     R"({"type":"image","x":3.141592653589793238462643383279})",
                                     recap::OpaqueLink::kNone,
                                     {}});
  const Message back = ThroughBody(m);
  CHECK(back.extra == m.extra);
  CHECK(std::get<recap::Text>(back.parts[0]).extra == std::get<recap::Text>(m.parts[0]).extra);
  CHECK(std::get<recap::Opaque>(back.parts[1]).payload ==
        std::get<recap::Opaque>(m.parts[1]).payload);
}

TEST_CASE(
    "R13.1 EncodeBodyPieces writes what EncodeBody writes, its large strings straight from the "
    "message, and EncodedBodySize is its length") {
  std::uint64_t first = 1;
  std::size_t cases = 300;
  if (auto replay = ReplaySeed()) {
    first = *replay;
    cases = 1;
  }
  recap_test::GeneratorOptions options;
  for (std::uint64_t seed = first; seed < first + cases; ++seed) {
    INFO("RECAP_SEED=" << seed);
    std::vector<Message> messages = recap_test::GenerateMessages(seed, options);
    // Strings at, around and far over the 64 KiB a piece is written from the message itself.
    Rng rng(seed);
    for (Message& m : messages) {
      if (!rng.OneIn(10)) continue;
      const std::size_t size = (std::size_t{64} << 10) - 1 + rng.Below(4) * 70000;
      if (rng.OneIn(2)) {
        m.extra = std::string(size, 'e');
      } else {
        m.parts.push_back(recap::Text{std::string(size, 't'), {}});
      }
    }
    for (const Message& m : messages) {
      std::string whole;
      recap::internal::EncodeBody(m, whole);
      CHECK(recap::internal::EncodedBodySize(m) == whole.size());
      std::string joined;
      std::size_t from_message = 0;
      recap::internal::EncodeBodyPieces(m, [&](std::string_view piece) {
        REQUIRE(!piece.empty());
        joined.append(piece);
        // A piece of 64 KiB or more is one of the message's own strings, not a copy.
        if (piece.size() >= (std::size_t{64} << 10) &&
            (piece.data() == m.extra.data() ||
             std::any_of(m.parts.begin(), m.parts.end(), [&](const recap::Part& p) {
               const auto* t = std::get_if<recap::Text>(&p);
               return t != nullptr && piece.data() == t->text.data();
             }))) {
          ++from_message;
        }
      });
      REQUIRE(joined == whole);
      std::size_t large = m.extra.size() >= (std::size_t{64} << 10) ? 1 : 0;
      for (const recap::Part& p : m.parts) {
        const auto* t = std::get_if<recap::Text>(&p);
        if (t != nullptr && t->text.size() >= (std::size_t{64} << 10)) ++large;
      }
      CHECK(from_message == large);
    }
  }
}

TEST_CASE(
    "R12.1 a pinned message keeps its flag through the stores' body form and the native form, and "
    "other bodies stay format 1") {
  Message plain = Message::UserText("Answer in French.");
  plain.id = "u1";
  Message pinned = plain;
  pinned.pinned = true;
  std::string body;
  recap::internal::EncodeBody(plain, body);
  REQUIRE_FALSE(body.empty());
  CHECK(body[0] == '\x01');  // readable by a recap that knows format 1 alone
  CHECK_FALSE(ThroughBody(plain).pinned);
  body.clear();
  recap::internal::EncodeBody(pinned, body);
  CHECK(body[0] == '\x02');
  CHECK(recap::internal::EncodedBodySize(pinned) == body.size());
  const Message back = ThroughBody(pinned);
  CHECK(back.pinned);
  CHECK(back.id == "u1");
  CHECK(recap::JoinedText(back) == "Answer in French.");
  // A flag this recap does not know, or a format after 2: written by a newer recap.
  std::string newer = body;
  const std::size_t flags_at = 1 + 1 + pinned.id.size() + 3;  // format, id, role, summary, form
  REQUIRE(newer[flags_at] == '\x01');
  newer[flags_at] = '\x09';  // bits 1-2 are the origin; bit 3 is no flag yet
  Result<Message> refused = recap::internal::DecodeBody(newer);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == recap::StatusCode::kCorruption);
  CHECK_THAT(refused.status().message(), Catch::Matchers::Contains("newer recap"));
  newer = body;
  newer[0] = '\x03';
  refused = recap::internal::DecodeBody(newer);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.status().message(), Catch::Matchers::Contains("body format 3"));
  // The origin a codec recorded (R14.1) rides in the flags, bits 1-2: a decoded message is
  // format 2; one stored before origins were recorded (format 1) reads as origin none.
  Message decoded_from = pinned;
  decoded_from.pinned = false;
  decoded_from.origin = recap::Origin::kOpenAIResponses;
  body.clear();
  recap::internal::EncodeBody(decoded_from, body);
  CHECK(body[0] == '\x02');
  CHECK(body[flags_at] == '\x06');
  CHECK(ThroughBody(decoded_from).origin == recap::Origin::kOpenAIResponses);
  decoded_from.pinned = true;
  decoded_from.origin = recap::Origin::kAnthropic;
  const Message both = ThroughBody(decoded_from);
  CHECK(both.pinned);
  CHECK(both.origin == recap::Origin::kAnthropic);
  CHECK(ThroughBody(plain).origin == recap::Origin::kNone);
  // Native JSON.
  Result<std::string> json = recap::native::EncodeMessage(pinned);
  REQUIRE(json.ok());
  CHECK(json->find("\"pinned\":true") != std::string::npos);
  Result<Message> decoded = recap::native::DecodeMessage(*json);
  REQUIRE(decoded.ok());
  CHECK(decoded->pinned);
  CHECK(recap::native::DecodeMessage(R"({"role":"user","pinned":"yes","parts":[]})")
            .status()
            .message()
            .find("pinned") != std::string::npos);
}
