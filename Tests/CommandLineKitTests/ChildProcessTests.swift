import CommandLineKit
import Foundation
import Testing

@Suite("Child processes from async code")
struct ChildProcessTests {
    /// A child that arms SIGALRM for 1 s and sleeps 3 s: with the signal deliverable it dies of it; with
    /// the signal blocked (inherited from a Swift async thread) it sleeps on and prints "blocked".
    @Test("a child started with runWithSignalsUnblocked receives its own SIGALRM")
    func alarmArrives() async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", "-c", "import signal, time; signal.alarm(1); time.sleep(3); print('blocked')",
        ]
        let output = Pipe()
        process.standardOutput = output
        try process.runWithSignalsUnblocked()
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGALRM, "\(printed)")
        #expect(printed.isEmpty)
    }
}
