import Foundation
import SiblingsTestSupport
import Testing

/// The ctgrind method (docs/crypto-core.md, "Constant time"): Tests/ConstantTimeCheck runs ML-KEM-768
/// decapsulation, X-Wing decapsulation and ML-DSA-65 signing with their secrets marked undefined, under
/// valgrind memcheck, which reports every branch or memory index that depends on them.
@Suite("Constant time under valgrind memcheck")
struct ConstantTimeTests {
    /// The check program, built beside this test bundle by `swift build --build-tests`.
    static func checkProgram() throws -> String {
        let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("ConstantTimeCheck").path
        guard FileManager.default.isExecutableFile(atPath: beside) else {
            throw VectorError(
                "ConstantTimeCheck is not built at \(beside): build with `swift build --build-tests` first")
        }
        return beside
    }

    static func valgrind(_ arguments: [String]) throws -> (status: Int32, output: String) {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/valgrind") else {
            throw VectorError("valgrind is not installed: run scripts/setup.sh (it installs Debian's valgrind)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/valgrind")
        process.arguments = ["--tool=memcheck", "--error-exitcode=99", "--track-origins=yes"] + arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, output)
    }

    @Test("no secret-dependent branch or memory index in ML-KEM, X-Wing and ML-DSA secret operations")
    func secretsDoNotSteerExecution() throws {
        let (status, output) = try Self.valgrind([try Self.checkProgram()])
        #expect(status == 0, "memcheck reported secret-dependent behaviour:\n\(output)")
        #expect(output.contains("ran with poisoned secrets"), "\(output)")
        #expect(output.contains("ERROR SUMMARY: 0 errors"), "\(output)")
    }

    @Test(
        "the harness can fail: a branch on a poisoned byte, and on a key decapsulated from poisoned secrets",
        arguments: ["--negative-control", "--poison-reaches-output"])
    func harnessCanFail(mode: String) throws {
        let (status, output) = try Self.valgrind([try Self.checkProgram(), mode])
        #expect(status == 99, "\(output)")
        #expect(output.contains("Conditional jump or move depends on uninitialised value"), "\(output)")
    }
}
