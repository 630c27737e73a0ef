// Secrets (the ARN and credit signalling keys) read from files instead of
// sitting inline in a config file that many may read: the file must be a
// regular file, not readable or writable by group or others (mode 0600 or
// stricter), given by an absolute path. Errors name the file and the
// problem, never the content.
#pragma once

#include <string>

#include "common/status.h"

namespace inc {

// The file's content without surrounding white space. `field` names the
// config field in errors ("credit.key_file").
Expected<std::string> ReadSecretFile(const std::string& path, const std::string& field);

}  // namespace inc
