/// @file
/// recap — version of the headers in use.
///
/// Every public symbol lives in `recap::v0` (an inline namespace), so two major versions can
/// be linked into one program without their symbols colliding. Code names them `recap::X`.
#ifndef RECAP_VERSION_H_
#define RECAP_VERSION_H_

#include "recap/export.h"

/// The major version of these headers (docs/compatibility.md says what each part promises).
#define RECAP_VERSION_MAJOR 0
/// The minor version of these headers.
#define RECAP_VERSION_MINOR 1
/// The patch version of these headers.
#define RECAP_VERSION_PATCH 0
/// The version of these headers as text, "MAJOR.MINOR.PATCH".
#define RECAP_VERSION_STRING "0.1.0"
/// One number to compare in the preprocessor: 0.1.0 is 100, 1.2.3 is 10203.
#define RECAP_VERSION \
  (RECAP_VERSION_MAJOR * 10000 + RECAP_VERSION_MINOR * 100 + RECAP_VERSION_PATCH)

/// Everything of recap: the Compactor and what it works with (recap/recap.h includes it all),
/// the session stores, the providers and the codecs' namespaces.
namespace recap {
inline namespace v0 {

/// The version of the compiled library ("0.1.0"), which may differ from RECAP_VERSION_STRING
/// when a program is built against other headers than the library it loads.
RECAP_EXPORT const char* Version() noexcept;

}  // namespace v0
}  // namespace recap

#endif  // RECAP_VERSION_H_
