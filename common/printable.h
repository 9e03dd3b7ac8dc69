#pragma once
// Text that came from another process (a peer's message, a host name) made safe to put in
// one log line: a newline in it must not start a line that looks like ddprun's own.

#include <string>
#include "absl/strings/string_view.h"

namespace ddprun {

/// `text` with every control character (newlines included) and DEL written as \xNN.
std::string Printable(absl::string_view text);
/// The same for text of several lines (a traceback, a report): newlines and tabs are kept,
/// every other control character (a carriage return, an escape sequence that clears the
/// screen or sets the terminal's title) is written as \xNN.
std::string PrintableLines(absl::string_view text);

}  // namespace ddprun
