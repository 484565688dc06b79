/// Runs async work one at a time per key, in the order it asked, while work for other keys runs freely.
///
/// For read-then-write sequences whose reads must see the previous writer's result: two publishes of one
/// account's bindings that interleave could log the older roster after the newer one.
public actor KeyedSerializer<Key: Hashable & Sendable> {
    /// For each busy key, the continuations of those waiting their turn, oldest first.
    private var waiting: [Key: [CheckedContinuation<Void, Never>]] = [:]

    public init() {}

    /// Runs `body` once every earlier call for `key` has finished, and returns its result.
    public func run<T: Sendable>(_ key: Key, _ body: @Sendable () async throws -> T) async throws -> T {
        await acquire(key)
        defer { release(key) }
        return try await body()
    }

    private func acquire(_ key: Key) async {
        guard waiting[key] != nil else {
            waiting[key] = []
            return
        }
        await withCheckedContinuation { waiting[key, default: []].append($0) }
    }

    private func release(_ key: Key) {
        guard var queue = waiting[key], !queue.isEmpty else {
            waiting[key] = nil
            return
        }
        // The turn passes straight to the next waiter: the key stays busy.
        let next = queue.removeFirst()
        waiting[key] = queue
        next.resume()
    }
}
