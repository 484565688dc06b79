import Foundation
import Processes

/// A running outside reference implementation (Tests/Reference/oracle.py in the project's venv), asked
/// one question per line: `{"op": ..., args}` in, `{"ok": {...}}` or `{"error": "..."}` out, bytes as hex.
///
/// The venv is made by scripts/setup.sh, which exports its interpreter as `$SIBLINGS_PYTHON`; without
/// that variable the default is `.venv/bin/python` in the package root. One oracle per test: they are
/// cheap, and nothing is shared between tests that run in parallel.
public final class ReferenceOracle {
    private let process: ChildProcess
    private let input: FileHandle
    private let output: FileHandle
    private var buffer = Data()

    /// Starts `script` from Tests/Reference (oracle.py by default; webauthn_oracle.py for the WebAuthn tests).
    public init(script: String = "oracle.py") throws {
        let python = try Self.python()
        let script = Vectors.packageRoot.appendingPathComponent("Tests/Reference/\(script)")
        process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script.path]
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        input = stdin.fileHandleForWriting
        output = stdout.fileHandleForReading
        try process.run()
    }

    /// The project venv's interpreter: `$SIBLINGS_PYTHON`, else `.venv/bin/python` in the package root.
    /// Throws, saying how to install it, if it is not there; tests that need Python fail rather than skip.
    public static func python() throws -> String {
        let python =
            ProcessInfo.processInfo.environment["SIBLINGS_PYTHON"].flatMap { $0.isEmpty ? nil : $0 }
            ?? Vectors.packageRoot.appendingPathComponent(".venv/bin/python").path
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw VectorError(
                "the outside reference implementations are not installed: no Python at \(python). "
                    + "Run scripts/setup.sh (scripts/test.sh does), or set SIBLINGS_PYTHON.")
        }
        return python
    }

    /// The oracle exits when its input closes; one that has not within 30 s is killed, so a test never waits
    /// for ever on it.
    deinit {
        try? input.close()
        if !process.waitUntilExit(timeout: .seconds(30)) {
            process.kill()
            process.waitUntilExit()
        }
    }

    /// Asks the oracle to run `op` with `args` (each `Data` sent as hex, everything else as JSON).
    /// Returns the result fields (hex strings for bytes) or throws ``ReferenceError`` with the
    /// reference's own error message.
    public func call(_ op: String, _ args: [String: any Sendable] = [:]) throws -> [String: Any] {
        var request: [String: Any] = ["op": op]
        for (key, value) in args {
            request[key] = (value as? Data)?.hex ?? value
        }
        var line = try JSONSerialization.data(withJSONObject: request)
        line.append(0x0a)
        try input.write(contentsOf: line)
        let reply = try readLine()
        guard let object = try JSONSerialization.jsonObject(with: reply) as? [String: Any] else {
            throw VectorError("the reference answered something that is not a JSON object")
        }
        if let error = object["error"] as? String { throw ReferenceError(message: error) }
        guard let ok = object["ok"] as? [String: Any] else {
            throw VectorError("the reference answered neither ok nor error")
        }
        return ok
    }

    /// A bytes result (hex-decoded).
    public func bytes(_ op: String, _ args: [String: any Sendable] = [:], field: String = "out") throws -> Data {
        let result = try call(op, args)
        guard let hex = result[field] as? String, let data = Data(hex: hex) else {
            throw VectorError("the reference's \(op) returned no hex \(field)")
        }
        return data
    }

    /// A boolean result.
    public func bool(_ op: String, _ args: [String: any Sendable] = [:], field: String = "out") throws -> Bool {
        guard let value = try call(op, args)[field] as? Bool else {
            throw VectorError("the reference's \(op) returned no boolean \(field)")
        }
        return value
    }

    private func readLine() throws -> Data {
        while true {
            if let newline = buffer.firstIndex(of: 0x0a) {
                let line = buffer[buffer.startIndex..<newline]
                buffer = Data(buffer[(newline + 1)...])
                return Data(line)
            }
            let chunk = output.availableData
            guard !chunk.isEmpty else {
                throw VectorError("the reference process exited; its error output above says why")
            }
            buffer.append(chunk)
        }
    }
}

/// The reference implementation refused an operation (the message is its own).
public struct ReferenceError: Error, CustomStringConvertible {
    public let message: String
    public var description: String { "reference: \(message)" }
}
