import CommandLineKit
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Where a command reads a secret (the recovery kit, a passphrase, six join words): from the terminal with echo
/// off by default, as `age -p` and `ssh-keygen` ask; from standard input only with `--secret-stdin`; from an
/// environment variable only when the person names it with `--secret-env NAME`, and then with a warning, since
/// every program of theirs can read their environment and some tools log it.
struct SecretOptions: ParsableArguments {
    @Flag(
        name: .long("secret-stdin"),
        help: "Read the kit, passphrase or words from the first line of standard input, not the terminal.")
    var fromStandardInput: Bool
    @OptionalOption(
        name: .long("secret-env"),
        help: "Read the kit, passphrase or words from this environment variable (warned: it can leak).")
    var environmentName: String?

    /// Reads `what` (said in the prompt and in errors). `confirm`: on the terminal, ask twice and compare, as
    /// for a new passphrase.
    func read(_ what: String, confirm: Bool = false) throws -> String {
        if fromStandardInput && environmentName != nil {
            throw failure("give --secret-stdin or --secret-env, not both")
        }
        if let name = environmentName {
            guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else {
                throw failure("--secret-env \(name): $\(name) is not set, or empty, so there is no \(what) to read")
            }
            streams.err(
                "sempere: warning: reading \(what) from $\(name): every program you run can read your environment, "
                    + "and some log it; unset it once done, or let sempere ask on the terminal")
            return value.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        if fromStandardInput {
            let first = readStandardInput().split(separator: "\n", omittingEmptySubsequences: false).first
            guard let line = first.map(String.init), !line.trimmingCharacters(in: .whitespaces).isEmpty else {
                throw failure("--secret-stdin: standard input holds no \(what) on its first line")
            }
            return line.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let secret = try Self.askTerminal("\(what.prefix(1).uppercased() + what.dropFirst()): ", what: what)
        if confirm, try Self.askTerminal("The same again, to check: ", what: what) != secret {
            throw failure("the two entries of \(what) differ; nothing was done")
        }
        return secret
    }

    /// Asks on the controlling terminal with echo off, and restores it (also when reading fails).
    static func askTerminal(_ prompt: String, what: String) throws -> String {
        let descriptor = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw failure(
                "\(what) is read from the terminal, and this command has none: give --secret-stdin to read it from "
                    + "standard input, or --secret-env NAME to read it from an environment variable")
        }
        defer { close(descriptor) }
        _ = prompt.withCString { write(descriptor, $0, strlen($0)) }
        var saved = termios()
        let isTerminal = tcgetattr(descriptor, &saved) == 0
        if isTerminal {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            quiet.c_lflag |= tcflag_t(ECHONL)
            tcsetattr(descriptor, TCSAFLUSH, &quiet)
        }
        defer { if isTerminal { tcsetattr(descriptor, TCSAFLUSH, &saved) } }
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let count = Glibc.read(descriptor, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            guard count == 1, byte != UInt8(ascii: "\n") else { break }
            bytes.append(byte)
        }
        let line = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !line.isEmpty else { throw failure("no \(what) was typed; nothing was done") }
        return line
    }
}
