import Foundation
import Processes
import SiblingsTestSupport
import Testing

/// docs/openapi.yaml against the built pixie-server, by schemathesis (the venv's, pinned in requirements.txt):
/// generated valid and invalid requests to every operation; every response must be a non-5xx the spec lists
/// for that operation, with its content type, headers and schema; other methods are 405 with `Allow`; the
/// bearer endpoints refuse without a session. Afterwards `/metrics` must show no 5xx at all, whatever
/// schemathesis sent.
@Suite("docs/openapi.yaml, checked by schemathesis against the running server")
struct SchemathesisTests {
    /// The venv's bin directory: beside `$SIBLINGS_PYTHON` (set by scripts/setup.sh), else `.venv/bin`.
    static var venvBin: URL {
        if let python = ProcessInfo.processInfo.environment["SIBLINGS_PYTHON"], !python.isEmpty {
            return URL(fileURLWithPath: python).deletingLastPathComponent()
        }
        return ServerProcess.packageRoot.appendingPathComponent(".venv/bin")
    }

    /// The response checks, plus: a method the spec does not list is 405 with a right `Allow`, and the bearer
    /// endpoints refuse a request without a session or with a bad one. Not `positive_data_acceptance` or
    /// `negative_data_rejection`: a schema cannot say which base64url is canonical or which bytes are a key.
    static let checks = [
        "not_a_server_error", "status_code_conformance", "content_type_conformance",
        "response_schema_conformance", "response_headers_conformance", "unsupported_method",
        "allow_header_conformance", "missing_required_header", "ignored_auth",
    ].joined(separator: ",")

    @Test("every operation answers as docs/openapi.yaml says, and nothing answers 5xx")
    func conformance() async throws {
        let python = Self.venvBin.appendingPathComponent("python")
        let schemathesis = Self.venvBin.appendingPathComponent("schemathesis")
        for tool in [python, schemathesis] where !FileManager.default.isExecutableFile(atPath: tool.path) {
            let message =
                "\(tool.path) is missing: schemathesis and the WebAuthn references come from the project's venv; "
                + "run ./scripts/setup.sh"
            Issue.record(Comment(rawValue: message))
            return
        }
        let directory = try ServerProcess.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try await ServerProcess(
            dataDirectory: directory,
            extraArguments: [
                "--codes-per-number-per-hour", "1000000", "--client-requests-per-minute", "1000000",
            ])

        // An account and its session, so the bearer endpoints are tested past 401.
        let prepared = try await Self.run(
            python,
            [
                ServerProcess.packageRoot.appendingPathComponent("scripts/pixie_bench_prepare.py").path,
                server.address.absoluteString, directory.path, directory.path, "0",
            ], in: directory)
        try #require(prepared.status == 0, "scripts/pixie_bench_prepare.py failed:\n\(prepared.output)")
        let token = try #require(
            prepared.output.split(separator: "\n").last.flatMap {
                Data($0.utf8).jsonObject["session_token"] as? String
            },
            "\(prepared.output)")

        let spec = ServerProcess.packageRoot.appendingPathComponent("docs/openapi.yaml").path
        let common = [
            "run", spec, "--url", server.address.absoluteString, "--checks", Self.checks, "--seed", "20261129",
            "--max-examples", "30", "--suppress-health-check", "all", "--generation-database", "none",
            "--no-color", "--request-timeout", "120", "--header", "Authorization: Bearer \(token)",
        ]
        // Revoking ends the session, so that operation runs last, alone: without the stateful phase, which has
        // no links to follow inside one operation (schemathesis counts that as an error).
        for selection in [
            ["--exclude-path", "/v1/auth/sessions/revoke"],
            ["--include-path", "/v1/auth/sessions/revoke", "--phases", "examples,coverage,fuzzing"],
        ] {
            let run = try await Self.run(schemathesis, common + selection, in: directory)
            if run.status != 0 {
                Attachment.record(run.output, named: "schemathesis \(selection.joined(separator: " ")).txt")
            }
            #expect(run.status == 0, "schemathesis \(selection.joined(separator: " ")) failed:\n\(run.output)")
        }

        let metrics = String(decoding: try await server.request("GET", "/metrics").body, as: UTF8.self)
        let serverErrors = metrics.split(separator: "\n").filter {
            $0.hasPrefix("pixie_http_requests_total") && $0.contains("status=\"5")
        }
        #expect(serverErrors.isEmpty, "5xx answers:\n\(serverErrors.joined(separator: "\n"))")
        #expect(server.terminate() == 0)
    }

    /// Runs `tool arguments` in `directory` (schemathesis writes nothing else there) and returns its exit
    /// status and its standard output and error, interleaved.
    /// It waits on a thread of its own: schemathesis runs for a minute, and must not hold one of the suite's two
    /// concurrency threads for all of it.
    static func run(
        _ tool: URL, _ arguments: [String], in directory: URL
    ) async throws -> (
        status: Int32, output: String
    ) {
        try await onThread { try runBlocking(tool, arguments, in: directory) }
    }

    private static func runBlocking(
        _ tool: URL, _ arguments: [String], in directory: URL
    ) throws -> (status: Int32, output: String) {
        let process = ChildProcess()
        process.executableURL = tool
        process.arguments = arguments
        process.currentDirectoryURL = directory
        var environment = ProcessInfo.processInfo.environment
        environment["NO_COLOR"] = "1"
        environment["COLUMNS"] = "120"
        process.environment = environment
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }
}
