// The binary form of a Message that recap's database stores keep (the SQLite store's `bodies`
// table, the PostgreSQL store's `body` column). Private to recap: no installed header declares
// it and no library exports it (compiled into each library that uses it: recap_seam).
//
// Compact and fast to read back: loading a session decodes every body, so this is a
// length-prefixed layout that decodes at close to the speed of copying its bytes, not JSON.
// docs/sqlite-store.md describes it byte by byte; both stores write the same bytes.
//
//   body     = format(1 byte, = 1) id role(1) summary(1) form(1) extra nparts part*
//            | format(1 byte, = 2) id role(1) summary(1) form(1) flags extra nparts part*
//              flags (varint): bit 0 pinned, bits 1-2 Origin; format 2 only when flags != 0
//   part     = tag(1) fields          tag 0 Text:       text extra
//                                     tag 1 ToolCall:   id name arguments extra
//                                     tag 2 ToolResult: call_id is_error(1) form(1) extra
//                                                       nitems item*
//                                     tag 3 Opaque:     kind payload link(1) link_id
//   item     = tag(1) fields          tag 0 Text, tag 3 Opaque, as above
//   string   = length(varint) bytes   (UTF-8)
//   n*       = varint                  (unsigned LEB128)
#ifndef RECAP_SRC_CORE_RECAP_INTERNAL_BODY_CODEC_H_
#define RECAP_SRC_CORE_RECAP_INTERNAL_BODY_CODEC_H_

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "recap/message.h"
#include "recap/status.h"

namespace recap {
inline namespace v0 {
namespace internal {

// Appends the encoding of `m` to `out`.
void EncodeBody(const Message& m, std::string& out);

// The number of bytes EncodeBody appends for `m`, without encoding it.
std::size_t EncodedBodySize(const Message& m);

// The encoding of `m` handed to `write` in order, in pieces: strings of 64 KiB and more as
// views into `m` itself, the bytes between them gathered. Their concatenation is what
// EncodeBody appends; no copy of a whole body is made (a store writes a 200 MB tool output
// into its file piece by piece with one copy of it in memory: the message's own).
void EncodeBodyPieces(const Message& m, const std::function<void(std::string_view)>& write);

// Decodes one body. A truncated or malformed body is StatusCode::kCorruption.
Result<Message> DecodeBody(std::string_view body);

}  // namespace internal
}  // namespace v0
}  // namespace recap

#endif  // RECAP_SRC_CORE_RECAP_INTERNAL_BODY_CODEC_H_
