import PixieServer
import Synchronization
import Testing

@Suite("KeyedSerializer: one at a time per key")
struct KeyedSerializerTests {
    /// How many bodies run at once, per key, and the most seen.
    final class Occupancy: Sendable {
        private let state = Mutex<(now: [String: Int], most: [String: Int], ran: Int)>(([:], [:], 0))
        func enter(_ key: String) {
            state.withLock {
                $0.now[key, default: 0] += 1
                $0.most[key] = max($0.most[key] ?? 0, $0.now[key]!)
            }
        }
        func leave(_ key: String) {
            state.withLock {
                $0.now[key, default: 0] -= 1
                $0.ran += 1
            }
        }
        func most(_ key: String) -> Int { state.withLock { $0.most[key] ?? 0 } }
        var ran: Int { state.withLock { $0.ran } }
    }

    @Test func bodiesOfOneKeyNeverOverlapAndEveryOneRuns() async throws {
        let serializer = KeyedSerializer<String>()
        let occupancy = Occupancy()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<60 {
                let key = index % 2 == 0 ? "a" : "b"
                group.addTask {
                    try await serializer.run(key) {
                        occupancy.enter(key)
                        try await Task.sleep(for: .milliseconds(1))
                        occupancy.leave(key)
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(occupancy.ran == 60)
        #expect(occupancy.most("a") == 1)
        #expect(occupancy.most("b") == 1)
    }

    @Test func anotherKeyIsNotHeldUpAndAThrowingBodyReleasesItsKey() async throws {
        let serializer = KeyedSerializer<String>()
        let (gate, open) = AsyncStream.makeStream(of: Void.self)
        let (started, didStart) = AsyncStream.makeStream(of: Void.self)
        // "a" is held until the gate opens; "b" runs meanwhile.
        let holder = Task {
            try await serializer.run("a") {
                didStart.yield()
                for await _ in gate { break }
            }
        }
        for await _ in started { break }
        #expect(try await serializer.run("b") { 7 } == 7)
        open.yield()
        try await holder.value
        struct Failure: Error {}
        await #expect(throws: Failure.self) { try await serializer.run("a") { throw Failure() } }
        #expect(try await serializer.run("a") { "free again" } == "free again")
    }
}
