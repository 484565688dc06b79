import Foundation
import Processes
import SiblingsCrypto
import SystemCalls

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// How an age plugin's requests reach a person (C2SP age-plugin.md, "Phase 2"): a message to show ("touch your
/// YubiKey"), a PIN to ask for, a choice to confirm. Each answers nil (the protocol's `fail`) when there is no one
/// to ask; the plugin then decides whether it can go on.
public struct AgePluginUI: Sendable {
    /// Shows a message; returns whether it could.
    public var showMessage: @Sendable (String) -> Bool
    /// Asks for a secret (a PIN, a passphrase) without echoing it.
    public var requestSecret: @Sendable (String) -> String?
    /// Asks for a public value.
    public var requestPublic: @Sendable (String) -> String?
    /// Asks to choose between `yes` and `no` (when there is a `no`); true for yes.
    public var confirm: @Sendable (_ message: String, _ yes: String, _ no: String?) -> Bool?

    public init(
        showMessage: @escaping @Sendable (String) -> Bool,
        requestSecret: @escaping @Sendable (String) -> String?,
        requestPublic: @escaping @Sendable (String) -> String? = { _ in nil },
        confirm: @escaping @Sendable (_ message: String, _ yes: String, _ no: String?) -> Bool? = { _, _, _ in nil }
    ) {
        self.showMessage = showMessage
        self.requestSecret = requestSecret
        self.requestPublic = requestPublic
        self.confirm = confirm
    }

    /// No one to ask: messages are not shown and every request fails.
    public static let unattended = AgePluginUI(showMessage: { _ in false }, requestSecret: { _ in nil })
}

/// A recipient handled by an age plugin (C2SP age-plugin.md): `age1<name>1...`, wrapped by the program
/// `age-plugin-<name>` found in `PATH`, run with `--age-plugin=recipient-v1`. Its stanzas carry no labels (this
/// client does not send `extension-labels`), so it mixes with X25519 recipients as age 1.1 allows.
public struct AgePluginRecipient: AgeRecipient, CustomStringConvertible {
    /// The plugin's name, lowercase.
    public let name: String
    /// The recipient string, lowercase.
    public let string: String
    let ui: AgePluginUI
    let searchPath: String?

    /// Parses `age1<name>1...`.
    ///
    /// - Parameters:
    ///   - ui: how the plugin's requests reach the person.
    ///   - searchPath: the directories to find the plugin in, as `PATH` lists them; nil: this process's `PATH`.
    public init(string: String, ui: AgePluginUI = .unattended, searchPath: String? = nil) throws {
        guard let (hrp, _) = Bech32.decode(string), hrp.hasPrefix("age1"), AgePlugin.isName(hrp.dropFirst(4)) else {
            throw AgeError(
                .invalidRecipient,
                "\"\(string.prefix(24))...\" is not an age plugin recipient (age1<name>1...): check that it was "
                    + "copied whole")
        }
        name = String(hrp.dropFirst(4))
        self.string = string.lowercased()
        self.ui = ui
        self.searchPath = searchPath
    }

    public var description: String { string }

    /// Runs `age-plugin-<name> --age-plugin=recipient-v1` to wrap `fileKey`.
    public func wrap(fileKey: SymmetricKey) throws -> [AgeStanza] {
        let session = try AgePlugin.Session(
            name: name, stateMachine: "recipient-v1", ui: ui, searchPath: searchPath)
        var stanzas: [AgeStanza] = []
        var errors: [String] = []
        try session.run(
            phase1: [
                AgeStanza(type: "add-recipient", arguments: [string], body: Data()),
                AgeStanza(type: "wrap-file-key", arguments: [], body: fileKey.withUnsafeBytes { Data($0) }),
            ]
        ) { command in
            switch command.type {
            case "recipient-stanza":
                guard command.arguments.count >= 2, command.arguments[0] == "0" else {
                    throw session.protocolError("a recipient-stanza for a file other than the one it was given")
                }
                stanzas.append(
                    AgeStanza(
                        type: command.arguments[1], arguments: Array(command.arguments.dropFirst(2)),
                        body: command.body))
                return true
            case "labels":
                // Only a client that sent extension-labels may be sent labels; one may say "postquantum", which
                // this client cannot honour, so the stanzas are refused rather than mixed.
                throw session.protocolError("it sent labels, which this client did not ask for")
            case "error":
                errors.append(AgePlugin.errorText(command))
                return true
            default:
                return false
            }
        }
        guard errors.isEmpty else {
            throw AgeError(
                .plugin,
                "\(session.program) could not wrap to \(string.prefix(32))...: \(errors.joined(separator: "; "))")
        }
        guard !stanzas.isEmpty else {
            throw session.protocolError("it ended without a stanza or an error")
        }
        return stanzas
    }
}

/// An identity handled by an age plugin (C2SP age-plugin.md): `AGE-PLUGIN-<NAME>-1...`, which need not hold key
/// material, only what the plugin needs to find its key (a YubiKey's serial and slot, a TPM handle). Unwrapping
/// runs `age-plugin-<name> --age-plugin=identity-v1`, found in `PATH`, and passes it every stanza of the header.
///
/// A plugin that fails (missing, an error it reports, a crash) is an ``AgeError/Code/plugin`` error that says so,
/// never "no matching identity"; a plugin that finds no stanza for its key unwraps nothing (nil).
public struct AgePluginIdentity: AgeIdentity, CustomStringConvertible {
    /// The plugin's name, lowercase.
    public let name: String
    /// The identity string, uppercase.
    public let string: String
    let ui: AgePluginUI
    let searchPath: String?

    /// Parses `AGE-PLUGIN-<NAME>-1...`; `ui` and `searchPath` as for ``AgePluginRecipient``.
    public init(string: String, ui: AgePluginUI = .unattended, searchPath: String? = nil) throws {
        let prefix = "age-plugin-"
        guard let (hrp, _) = Bech32.decode(string), hrp.hasPrefix(prefix), hrp.hasSuffix("-"),
            AgePlugin.isName(hrp.dropFirst(prefix.count).dropLast())
        else {
            throw AgeError(
                .invalidIdentity,
                "\"\(string.prefix(20))...\" is not an age plugin identity (AGE-PLUGIN-<NAME>-1...): check that it "
                    + "was copied whole")
        }
        name = String(hrp.dropFirst(prefix.count).dropLast())
        self.string = string.uppercased()
        self.ui = ui
        self.searchPath = searchPath
    }

    /// The identity, never its string (which may name a key).
    public var description: String { "an age-plugin-\(name) identity" }

    public func unwrap(stanzas: [AgeStanza]) throws -> SymmetricKey? {
        let session = try AgePlugin.Session(
            name: name, stateMachine: "identity-v1", ui: ui, searchPath: searchPath)
        var fileKey: SymmetricKey?
        var errors: [String] = []
        var badStanza = false
        let phase1 =
            [AgeStanza(type: "add-identity", arguments: [string], body: Data())]
            + stanzas.map {
                AgeStanza(type: "recipient-stanza", arguments: ["0", $0.type] + $0.arguments, body: $0.body)
            }
        try session.run(phase1: phase1) { command in
            switch command.type {
            case "file-key":
                guard command.arguments == ["0"], command.body.count == 16, fileKey == nil, !badStanza else {
                    throw session.protocolError("a file-key that is not one 16-byte key for the file it was given")
                }
                fileKey = SymmetricKey(data: command.body)
                return true
            case "error":
                if command.arguments.first == "stanza" { badStanza = true }
                errors.append(AgePlugin.errorText(command))
                return true
            default:
                return false
            }
        }
        if let fileKey { return fileKey }
        if badStanza {
            throw AgeError.header("\(session.program) found a malformed stanza: \(errors.joined(separator: "; "))")
        }
        guard errors.isEmpty else {
            throw AgeError(.plugin, "\(session.program) could not unwrap: \(errors.joined(separator: "; "))")
        }
        return nil
    }
}

/// The client side of the age plugin protocol (C2SP age-plugin.md): finding `age-plugin-<name>`, and the two
/// phases of its v1 state machines over the plugin's standard input and output, as stanzas.
enum AgePlugin {
    /// A plugin name: `1*(ALPHA / DIGIT / "-" / "_" / "." / "+")`.
    static func isName(_ name: some StringProtocol) -> Bool {
        !name.isEmpty
            && name.utf8.allSatisfy {
                (0x30...0x39).contains($0) || (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0)
                    || [0x2d, 0x5f, 0x2e, 0x2b].contains($0)
            }
    }

    /// `age-plugin-<name>` in the absolute directories of `searchPath` (this process's `PATH` when nil); never a
    /// relative one, so a plugin is never run from the working directory (the spec's rule).
    static func binary(name: String, searchPath: String?) throws -> URL {
        let program = "age-plugin-" + name
        let path = searchPath ?? ProcessInfo.processInfo.environment["PATH"] ?? ""
        for directory in path.split(separator: ":") where directory.hasPrefix("/") {
            let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent(program)
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: candidate.path, isDirectory: &isDirectory),
                !isDirectory.boolValue, access(candidate.path, X_OK) == 0
            {
                return candidate
            }
        }
        throw AgeError(
            .plugin,
            "\(program) is not installed: no program of that name in PATH. Install the plugin this key needs (or "
                + "put it in PATH), then try again")
    }

    /// An `error` command's message, with what it is about.
    static func errorText(_ command: AgeStanza) -> String {
        let message = String(decoding: command.body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let about = command.arguments.joined(separator: " ")
        return about.isEmpty ? message : "\(message) (\(about))"
    }

    /// One run of a plugin in one state machine.
    final class Session {
        let program: String
        private let process = ChildProcess()
        private let input: FileHandle
        private let reader: LineReader
        private let errorOutput: ErrorCollector
        private let ui: AgePluginUI

        init(name: String, stateMachine: String, ui: AgePluginUI, searchPath: String?) throws {
            program = "age-plugin-" + name
            self.ui = ui
            let binary = try AgePlugin.binary(name: name, searchPath: searchPath)
            let stdin = Pipe()
            let stdout = Pipe()
            let stderr = Pipe()
            process.executableURL = binary
            process.arguments = ["--age-plugin=" + stateMachine]
            process.standardInput = stdin
            process.standardOutput = stdout
            process.standardError = stderr
            do {
                try process.run()
            } catch {
                throw AgeError(.plugin, "\(program) (\(binary.path)) could not be started: \(error)")
            }
            input = stdin.fileHandleForWriting
            reader = LineReader(stdout.fileHandleForReading)
            errorOutput = ErrorCollector(stderr.fileHandleForReading)
        }

        deinit { stop() }

        /// Closes the plugin's input, gives it `grace` to exit, then kills it; its status is collected.
        private func stop(grace: Duration = .zero) {
            try? input.close()
            if !process.waitUntilExit(timeout: grace) {
                process.kill()
                process.waitUntilExit()
            }
        }

        /// Sends `phase1` and `done`, then answers the plugin's commands until its `done`: `handle` takes the
        /// state machine's own commands (returning false for one it does not know); messages and requests go to
        /// the UI, and anything else is answered `unsupported`.
        func run(phase1: [AgeStanza], handle: (AgeStanza) throws -> Bool) throws {
            try send(phase1 + [AgeStanza(type: "done", arguments: [], body: Data())])
            while true {
                let command = try receive()
                if command.type == "done" { break }
                if try handle(command) {
                    try send([AgeStanza(type: "ok", arguments: [], body: Data())])
                } else {
                    try send([answer(command)])
                }
            }
            // A plugin exits once its input ends; one that lingers is not waited for.
            stop(grace: .seconds(5))
        }

        /// The answer to a message or request, through the UI; `unsupported` for a command this client does not know.
        private func answer(_ command: AgeStanza) throws -> AgeStanza {
            let text = String(decoding: command.body, as: UTF8.self)
            func reply(_ value: String?) -> AgeStanza {
                guard let value else { return AgeStanza(type: "fail", arguments: [], body: Data()) }
                return AgeStanza(type: "ok", arguments: [], body: Data(value.utf8))
            }
            switch command.type {
            case "msg":
                return ui.showMessage(text)
                    ? AgeStanza(type: "ok", arguments: [], body: Data())
                    : AgeStanza(type: "fail", arguments: [], body: Data())
            case "request-secret":
                return reply(ui.requestSecret(text))
            case "request-public":
                return reply(ui.requestPublic(text))
            case "confirm":
                let strings = command.arguments.map {
                    StrictBase64.decodeUnpadded($0).map { String(decoding: $0, as: UTF8.self) }
                }
                guard let yes = strings.first ?? nil else {
                    throw protocolError("a confirm without its yes string")
                }
                guard let choice = ui.confirm(text, yes, strings.count > 1 ? strings[1] : nil) else {
                    return AgeStanza(type: "fail", arguments: [], body: Data())
                }
                return AgeStanza(type: "ok", arguments: [choice ? "yes" : "no"], body: Data())
            default:
                return AgeStanza(type: "unsupported", arguments: [], body: Data())
            }
        }

        /// An error for a plugin that broke the protocol or stopped, with what it wrote to standard error.
        func protocolError(_ what: String) -> AgeError {
            let said = errorOutput.text()
            return AgeError(
                .plugin,
                "\(program) failed: \(what)" + (said.isEmpty ? "" : " (it said: \(said))")
                    + ". Check that the plugin and its key (a token, a card) are there, and try again")
        }

        private func send(_ stanzas: [AgeStanza]) throws {
            let bytes = Data(stanzas.map(\.encoded).joined().utf8)
            guard SigpipeFree.write(bytes, to: input.fileDescriptor) else {
                throw protocolError("it stopped reading its input")
            }
        }

        /// The plugin's next command, in the stanza grammar of the age header.
        private func receive() throws -> AgeStanza {
            guard let first = try reader.line() else {
                stop(grace: .seconds(5))
                throw protocolError(
                    "it ended (exit status \(process.terminationStatus)) before finishing the protocol")
            }
            guard first.hasPrefix("-> ") else {
                // Not the protocol: the plugin is stopped, not waited for (it may be waiting for more input).
                stop()
                throw protocolError("it wrote something other than a command (\"\(first.prefix(40))\")")
            }
            let arguments = first.dropFirst(3).split(separator: " ", omittingEmptySubsequences: false)
            guard arguments.allSatisfy(AgeHeader.isArbitraryString) else {
                throw protocolError("a command line outside the stanza grammar")
            }
            var body = Data()
            while true {
                guard let line = try reader.line(), line.utf8.count <= AgeHeader.columns,
                    let decoded = StrictBase64.decodeUnpadded(line)
                else {
                    throw protocolError("a command body that is not canonical base64 in 64-column lines")
                }
                body.append(decoded)
                if line.utf8.count < AgeHeader.columns { break }
            }
            return AgeStanza(
                type: String(arguments[0]), arguments: arguments.dropFirst().map(String.init), body: body)
        }
    }

    /// Lines from a pipe, without their `\n`; nil at its end.
    final class LineReader {
        private let handle: FileHandle
        private var buffer = Data()
        private var ended = false
        /// The longest line taken (a hybrid stanza's first line is about 1.5 KB).
        static let limit = 1 << 20

        init(_ handle: FileHandle) { self.handle = handle }

        func line() throws -> Substring? {
            while true {
                if let newline = buffer.firstIndex(of: 0x0a) {
                    let line = buffer[buffer.startIndex..<newline]
                    buffer = Data(buffer[(newline + 1)...])
                    return Substring(String(decoding: line, as: UTF8.self))
                }
                guard !ended, buffer.count < Self.limit else { return nil }
                let more = handle.availableData
                if more.isEmpty { ended = true } else { buffer.append(more) }
            }
        }
    }

    /// What a plugin writes to standard error, read as it comes (so a chatty plugin never blocks on a full pipe),
    /// the last 4 KiB kept for messages.
    final class ErrorCollector: @unchecked Sendable {
        // @unchecked: `collected` is written by the reading thread and read under `lock`.
        private let lock = NSLock()
        private var collected = Data()
        private let done = DispatchSemaphore(value: 0)

        init(_ handle: FileHandle) {
            Thread.detachNewThread { [self] in
                while case let more = handle.availableData, !more.isEmpty {
                    lock.withLock {
                        collected.append(more)
                        if collected.count > 4096 { collected = Data(collected.suffix(4096)) }
                    }
                }
                done.signal()
            }
        }

        /// What it wrote, once it has closed standard error (at most a second after it is asked).
        func text() -> String {
            _ = done.wait(timeout: .now() + 1)
            return lock.withLock {
                String(decoding: collected, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                    .replacingOccurrences(of: "\n", with: " ")
            }
        }
    }
}

/// Writes to a pipe whose reader may be gone without the process dying of SIGPIPE: the signal is blocked on this
/// thread for the write, and a SIGPIPE the write raised is taken back before the mask is restored.
enum SigpipeFree {
    #if canImport(Glibc)
        private static let systemWrite = Glibc.write
    #else
        private static let systemWrite = Darwin.write
    #endif

    static func write(_ data: Data, to descriptor: Int32) -> Bool {
        #if canImport(Darwin)
            // Darwin has a per-descriptor switch, and no sigtimedwait.
            _ = fcntl(descriptor, F_SETNOSIGPIPE, 1)
            return writeAll(data, to: descriptor)
        #else
            return withSigpipeHeld { writeAll(data, to: descriptor) }
        #endif
    }

    #if !canImport(Darwin)
        /// Runs `body` with SIGPIPE blocked on this thread, and takes back a SIGPIPE it raised.
        private static func withSigpipeHeld(_ body: () -> Bool) -> Bool {
            var pipeSignal = sigset_t()
            sigemptyset(&pipeSignal)
            sigaddset(&pipeSignal, SIGPIPE)
            var previous = sigset_t()
            pthread_sigmask(SIG_BLOCK, &pipeSignal, &previous)
            var pendingBefore = sigset_t()
            sigpending(&pendingBefore)
            let wasPending = sigismember(&pendingBefore, SIGPIPE) == 1
            defer {
                var pending = sigset_t()
                sigpending(&pending)
                if !wasPending, sigismember(&pending, SIGPIPE) == 1 {
                    var now = timespec()
                    _ = sigtimedwait(&pipeSignal, nil, &now)
                }
                pthread_sigmask(SIG_SETMASK, &previous, nil)
            }
            return body()
        }
    #endif

    private static func writeAll(_ data: Data, to descriptor: Int32) -> Bool {
        data.withUnsafeBytes { buffer -> Bool in
            var offset = 0
            while offset < buffer.count {
                let written = retryingInterrupts {
                    systemWrite(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                }
                guard written > 0 else { return false }
                offset += written
            }
            return true
        }
    }
}
