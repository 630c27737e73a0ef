// SPDX-License-Identifier: Apache-2.0
// Secrets (the ARN and credit signalling keys) read from files instead of
// sitting inline in a config file that many may read: the file must be a
// regular file, not readable or writable by group or others (mode 0600 or
// stricter), given by an absolute path. Errors name the file and the
// problem, never the content.
#pragma once

#include <optional>
#include <string>

#include "common/siphash.h"
#include "common/status.h"

namespace inc {

// The file's content without surrounding white space. `field` names the
// config field in errors ("credit.key_file").
Expected<std::string> ReadSecretFile(const std::string& path, const std::string& field);

// A signalling key set inline as 32 hex digits (`hex`, config field
// `hex_field`) or in a file as above (`file`, field `file_field`): the key,
// none if neither is set, or an error naming the field when both are or
// the one set does not hold a key.
Expected<std::optional<SipKey>> ReadKeySetting(const std::string& hex, const std::string& file,
                                               const std::string& hex_field, const std::string& file_field);

}  // namespace inc
