import Foundation
import Processes
import Testing

/// The built `bench` binary, run as a person would: CommandLineKit's exit statuses and streams.
@Suite("A CommandLineKit program, run as a binary")
struct BinaryTests {
    static func run(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
        let path = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("bench").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            Issue.record("bench is not built at \(path): build with `swift build --build-tests` first")
            return (-1, "", "")
        }
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (
            process.terminationStatus, String(decoding: outData, as: UTF8.self),
            String(decoding: errData, as: UTF8.self)
        )
    }

    @Test("--help prints usage to standard output and exits 0")
    func help() throws {
        let result = try Self.run(["--help"])
        #expect(result.status == 0)
        #expect(result.out.contains("USAGE: bench [--seconds <seconds>]"))
        #expect(result.err.isEmpty)
    }

    @Test("a usage error goes to standard error with a pointer to --help, exit 64")
    func usage() throws {
        for arguments in [["--rounds", "0"], ["--frobnicate"], ["--seconds"], ["--only", "everything"]] {
            let result = try Self.run(arguments)
            #expect(result.status == 64, "\(arguments)")
            #expect(result.err.contains("error: ") && result.err.contains("Run 'bench --help' for usage."))
            #expect(result.out.isEmpty)
        }
    }

    @Test("success exits 0")
    func success() throws {
        let result = try Self.run(["--self-check-only"])
        #expect(result.status == 0)
        #expect(result.out.contains("round trips pass"))
    }
}
