import Foundation
import Processes
import SiblingsTestSupport
import Testing

/// The ctgrind method (docs/crypto-core.md, "Constant time"): Tests/ConstantTimeCheck runs key generation,
/// ML-KEM-768 and X-Wing encapsulation and decapsulation, HPKE seal and open, and ML-DSA-65 and hybrid
/// signing with their secrets marked undefined, under valgrind memcheck, which reports every branch or
/// memory index that depends on them; and it audits what ML-DSA signing declassifies on purpose.
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
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/valgrind")
        let suppressions = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("ConstantTimeCheck/public-outcomes.supp").path
        process.arguments =
            ["--tool=memcheck", "--error-exitcode=99", "--track-origins=yes", "--suppressions=\(suppressions)"]
            + arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, output)
    }

    @Test("no secret-dependent branch or memory index in key generation, KEMs, HPKE and signing")
    func secretsDoNotSteerExecution() throws {
        let (status, output) = try Self.valgrind([try Self.checkProgram()])
        #expect(status == 0, "memcheck reported secret-dependent behaviour:\n\(output)")
        #expect(output.contains("ran with poisoned secrets"), "\(output)")
        #expect(output.contains("signing declassified only its rejection bits"), "\(output)")
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

    /// The declassification audit can fail: the log the signing loop before issue 13 produced (c̃ made
    /// public for every candidate, four separate reject decisions) is refused with status 3, while the log
    /// of a real signing run today passes.
    @Test("the declassification audit refuses a declassified challenge")
    func auditCanFail() throws {
        let (status, output) = try Self.valgrind([try Self.checkProgram(), "--audit-control"])
        #expect(status == 3, "\(output)")
        #expect(output.contains("declassified more than its rejection bits"), "\(output)")
    }
}
