import Foundation

/// Heap bytes that are wiped (`OpenSSLMemory.cleanse`) when the last reference goes away.
///
/// Immutable after initialisation, which is why it may be shared across threads.
final class SecureBytes: @unchecked Sendable {
    private let storage: UnsafeMutableRawBufferPointer

    /// Copies `bytes` into fresh storage.
    init(_ bytes: some DataProtocol) {
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 16)
        var offset = 0
        for region in bytes.regions {
            region.withUnsafeBytes { source in
                guard let base = source.baseAddress, source.count > 0 else { return }
                (storage.baseAddress! + offset).copyMemory(from: base, byteCount: source.count)
            }
            offset += region.count
        }
        self.storage = storage
        count = offset
    }

    /// Fills `count` bytes with `initializer`. If it throws, the bytes are wiped and freed.
    init(count: Int, initializer: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 16)
        do {
            try initializer(UnsafeMutableRawBufferPointer(rebasing: storage[0..<count]))
        } catch {
            // Before any stored property is set, so deinit does not run for this object.
            OpenSSLMemory.cleanse(storage)
            storage.deallocate()
            throw error
        }
        self.storage = storage
        self.count = count
    }

    let count: Int

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(rebasing: storage[0..<count]))
    }

    deinit {
        OpenSSLMemory.cleanse(storage)
        storage.deallocate()
    }
}
