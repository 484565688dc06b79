import Foundation
import PixieWire
import SiblingsCrypto

/// Who stamps a store's writes (docs/pixie-sync.md, "Versions" and "Digests"): this device's ``AuthorTag``, from
/// its roster pubkey, and the account's ``SyncItemKey``, from the account seed. A device that is not a member yet
/// (or was enrolled without the seeds) has no item key: its writes carry versions but no items, and the first write
/// under a key computes every item and digest.
public struct StoreWriter: Sendable {
    public let author: AuthorTag
    let itemKey: SyncItemKey?

    public init(author: AuthorTag, accountSeed: Data?) throws {
        self.author = author
        self.itemKey = try accountSeed.flatMap { $0.isEmpty ? nil : try SyncItemKey(accountSeed: $0) }
    }

    /// The writer of the device set up as `state`.
    init(state: DeviceState) {
        self.author = (try? state.author) ?? .migrated
        self.itemKey = state.membership.flatMap { try? SyncItemKey(accountSeed: $0.accountSeed.data) }
    }

    /// A store opened where no device is set up: its writes carry the migrated author and no items.
    static let unknown = StoreWriter(author: .migrated, itemKey: nil)

    private init(author: AuthorTag, itemKey: SyncItemKey?) {
        self.author = author
        self.itemKey = itemKey
    }
}
