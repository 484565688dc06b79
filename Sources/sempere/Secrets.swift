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
            return Self.withoutLineEnd(value)
        }
        if fromStandardInput {
            let first = readStandardInput().split(separator: "\n", omittingEmptySubsequences: false).first
            guard let line = first.map(String.init), !line.trimmingCharacters(in: .whitespaces).isEmpty else {
                throw failure("--secret-stdin: standard input holds no \(what) on its first line")
            }
            return Self.withoutLineEnd(line)
        }
        let secret = try Self.askTerminal("\(what.prefix(1).uppercased() + what.dropFirst()): ", what: what)
        if confirm, try Self.askTerminal("The same again, to check: ", what: what) != secret {
            throw failure("the two entries of \(what) differ; nothing was done")
        }
        return secret
    }

    /// `text` without a line end (`\n`, `\r\n`): a passphrase keeps its other spaces, as it was made with them (the
    /// kit and the words ignore white space themselves).
    static func withoutLineEnd(_ text: String) -> String {
        var text = text
        while text.hasSuffix("\n") || text.hasSuffix("\r") { text.removeLast() }
        return text
    }

    /// Asks on the controlling terminal with echo off, and restores it (also when reading fails, and when a signal
    /// ends the program while it waits: Ctrl-C at the prompt must not leave the terminal without echo).
    /// `elsewhere`: what to give instead when there is no terminal (nil: `--secret-stdin` or `--secret-env`).
    static func askTerminal(_ prompt: String, what: String, elsewhere: String? = nil) throws -> String {
        let descriptor = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw failure(
                "\(what) is read from the terminal, and this command has none: "
                    + (elsewhere
                        ?? "give --secret-stdin to read it from standard input, or --secret-env NAME to read it from "
                        + "an environment variable"))
        }
        defer { close(descriptor) }
        _ = prompt.withCString { write(descriptor, $0, strlen($0)) }
        var saved = termios()
        let isTerminal = tcgetattr(descriptor, &saved) == 0
        if isTerminal {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            quiet.c_lflag |= tcflag_t(ECHONL)
            TerminalRestore.arm(descriptor, saved)
            tcsetattr(descriptor, TCSAFLUSH, &quiet)
        }
        defer {
            if isTerminal {
                tcsetattr(descriptor, TCSAFLUSH, &saved)
                TerminalRestore.disarm()
            }
        }
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let count = Glibc.read(descriptor, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            guard count == 1, byte != UInt8(ascii: "\n") else { break }
            bytes.append(byte)
        }
        let line = withoutLineEnd(String(decoding: bytes, as: UTF8.self))
        guard !line.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw failure("no \(what) was typed; nothing was done")
        }
        return line
    }
}

/// The terminal's settings while a prompt has echo off, put back by a signal that ends the program (SIGINT,
/// SIGTERM, SIGHUP, SIGQUIT), which then ends it as it would have, as readpassphrase(3) does.
enum TerminalRestore {
    nonisolated(unsafe) private static var descriptor: Int32 = -1
    nonisolated(unsafe) private static var saved = termios()
    private static let signals = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]

    static func arm(_ descriptor: Int32, _ settings: termios) {
        saved = settings
        Self.descriptor = descriptor
        for number in signals {
            signal(number) { received in
                if TerminalRestore.descriptor >= 0 {
                    tcsetattr(TerminalRestore.descriptor, TCSAFLUSH, &TerminalRestore.saved)
                }
                signal(received, SIG_DFL)
                raise(received)
            }
        }
    }

    static func disarm() {
        descriptor = -1
        for number in signals { signal(number, SIG_DFL) }
    }
}
