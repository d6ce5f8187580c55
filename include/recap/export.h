/// @file
/// recap — export macros.
///
/// The library is built with hidden symbol visibility: only declarations marked RECAP_EXPORT
/// are part of the binary interface. The same header serves the static and the shared build;
/// on ELF and Mach-O the attribute is harmless in a static archive. On Windows a consumer of
/// the shared library gets dllimport unless RECAP_STATIC is defined (the package config
/// defines it for the static build).
#ifndef RECAP_EXPORT_H_
#define RECAP_EXPORT_H_

/// @def RECAP_EXPORT
/// Marks a declaration as part of the binary interface: default visibility on ELF and Mach-O;
/// on Windows dllexport while the library is built, dllimport for a consumer of the shared
/// library, nothing with RECAP_STATIC.
#if defined(_WIN32) || defined(__CYGWIN__)
#if defined(RECAP_STATIC)
#define RECAP_EXPORT
#elif defined(RECAP_BUILDING_LIBRARY)
#define RECAP_EXPORT __declspec(dllexport)
#else
#define RECAP_EXPORT __declspec(dllimport)
#endif
#else
#define RECAP_EXPORT __attribute__((visibility("default")))
#endif

#endif  // RECAP_EXPORT_H_
