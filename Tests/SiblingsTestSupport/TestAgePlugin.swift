import Foundation
import Processes

/// age-plugin-siblingstest (Tests/Reference/age_plugin_siblingstest.py, an age plugin written from C2SP
/// age-plugin.md with pyca/cryptography) installed in a directory of its own, to put in `PATH`.
///
/// `directory` holds the program `age-plugin-siblingstest` (a shell script that runs the Python plugin in the
/// project's venv) and an identity file it generated, `identity.txt` (`# recipient: age1siblingstest1...` then
/// `AGE-PLUGIN-SIBLINGSTEST-1...`). `log` gets one line per run of the plugin: its state machine, then its mode.
public final class TestAgePlugin: Sendable {
    public let directory: URL
    public let identityFile: URL
    public let log: URL
    /// The identity file's text.
    public let identityText: String
    /// The recipient it names.
    public let recipient: String
    /// The identity line.
    public let identity: String

    public init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("age-plugin-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        identityFile = directory.appendingPathComponent("identity.txt")
        log = directory.appendingPathComponent("runs.log")
        let program = try Self.install(in: directory, log: log, mode: nil)

        let process = ChildProcess()
        process.executableURL = program
        process.arguments = ["--generate"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0,
            let recipient = text.split(separator: "\n").first(where: { $0.hasPrefix("# recipient: ") })?.dropFirst(13),
            let identity = text.split(separator: "\n").first(where: { $0.hasPrefix("AGE-PLUGIN-") })
        else { throw VectorError("age-plugin-siblingstest --generate printed no identity: \(text)") }
        try text.write(to: identityFile, atomically: true, encoding: .utf8)
        identityText = text
        self.recipient = String(recipient)
        self.identity = String(identity)
    }

    /// Writes the program `age-plugin-siblingstest` into `directory`: it runs the plugin with its log, and with
    /// `mode` (absent, crash, pin, msg) unless the environment names one.
    private static func install(in directory: URL, log: URL, mode: String?) throws -> URL {
        let script = Vectors.packageRoot.appendingPathComponent("Tests/Reference/age_plugin_siblingstest.py")
        let program = directory.appendingPathComponent("age-plugin-siblingstest")
        let setMode =
            mode.map { ": \"${AGE_PLUGIN_SIBLINGSTEST_MODE:=\($0)}\"\nexport AGE_PLUGIN_SIBLINGSTEST_MODE\n" } ?? ""
        try """
        #!/bin/sh
        : "${AGE_PLUGIN_SIBLINGSTEST_LOG:=\(log.path)}"
        export AGE_PLUGIN_SIBLINGSTEST_LOG
        \(setMode)exec '\(try ReferenceOracle.python())' '\(script.path)' "$@"

        """.write(to: program, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: program.path)
        return program
    }

    /// A search path (as `PATH` lists directories) with the plugin in `mode`: absent (its token unplugged), crash,
    /// pin (it asks for 123456), msg (it shows a message); the same identity, the same log.
    public func searchPath(mode: String) throws -> String {
        let directory = self.directory.appendingPathComponent("mode-\(mode)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        _ = try Self.install(in: directory, log: log, mode: mode)
        return directory.path
    }

    /// `PATH` with the plugin's directory first.
    public var path: String {
        directory.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
    }

    /// The plugin's runs so far: one line each, `--age-plugin=<state machine> <mode>`.
    public func runs() -> [String] {
        ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").map {
            $0.trimmingCharacters(in: .whitespaces)
        }
    }

    /// The environment a child process runs the plugin with: `PATH` with the plugin first, in `mode` when given.
    public func environment(mode: String? = nil) -> [String: String] {
        ["PATH": path, "AGE_PLUGIN_SIBLINGSTEST_MODE": mode ?? ""]
    }

    public func remove() { try? FileManager.default.removeItem(at: directory) }
}
