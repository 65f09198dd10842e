"""`commerce-content seed`: demo data so every endpoint has something to show. Idempotent: a
database that already has the demo users is left as it is."""

from __future__ import annotations

from decimal import Decimal

from servicekit.db.engine import create_engine, create_session_factory
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from commerce_content.models import (
    Article,
    ArticleStatus,
    Category,
    Comment,
    Page,
    Post,
    Product,
    ProductCategory,
    ProductVariant,
    Tag,
    User,
)
from commerce_content.settings import Settings

USERS = [
    ("admin@shop.example", "Alex Admin", "admin"),
    ("manager@shop.example", "Morgan Manager", "manager"),
    ("user@shop.example", "Uma User", "user"),
    ("guest@shop.example", "Gus Guest", "guest"),
]
PRODUCTS = [
    (
        "Ceramic mug",
        "ceramic-mug",
        "A stoneware mug, 350 ml.",
        "14.00",
        None,
        40,
        ["kitchen", "gift"],
    ),
    ("Linen apron", "linen-apron", "Washed linen, one size.", "32.00", "27.50", 12, ["kitchen"]),
    ("Oak board", "oak-board", "A chopping board of solid oak.", "45.00", None, 8, ["kitchen"]),
    (
        "Wool throw",
        "wool-throw",
        "Merino wool, 130 x 170 cm.",
        "89.00",
        "79.00",
        5,
        ["home", "gift"],
    ),
    ("Glass carafe", "glass-carafe", "Borosilicate, one litre.", "24.00", None, 0, ["kitchen"]),
    ("Candle set", "candle-set", "Three beeswax candles.", "18.00", None, 25, ["home", "gift"]),
]


async def seed_demo(settings: Settings) -> bool:
    """Load the demo data; False when it was there already."""
    engine = create_engine(settings)
    try:
        async with create_session_factory(engine)() as session, session.begin():
            if (await session.exec(select(User).where(User.email == USERS[0][0]))).first():
                return False
            await _load(session, settings)
        return True
    finally:
        await engine.dispose()


async def _load(session: AsyncSession, settings: Settings) -> None:
    users = [User(email=e, name=n, role=r) for e, n, r in USERS]
    session.add_all(users)
    kitchen, home = Category(name="Kitchen", slug="kitchen"), Category(name="Home", slug="home")
    session.add_all([kitchen, home])
    await session.flush()
    for index, (name, slug, description, price, sale, stock, tags) in enumerate(PRODUCTS):
        product = Product(
            name=name,
            slug=slug,
            description=description,
            base_price=Decimal(price),
            sale_price=Decimal(sale) if sale else None,
            currency=settings.currency.upper(),
            stock=stock,
            image=f"/static/{slug}.jpg",
            tags=tags,
            parent_id=settings.catalog_parent_id,
            menu_index=index,
            published=True,
        )
        session.add(product)
        await session.flush()
        category = home if "home" in tags else kitchen
        session.add(ProductCategory(product_id=product.id, category_id=category.id))
        for variant in ("small", "large"):
            session.add(
                ProductVariant(
                    product_id=product.id,
                    sku=f"{slug}-{variant}",
                    name=variant.title(),
                    price=Decimal(price) + (Decimal("5.00") if variant == "large" else 0),
                    stock=stock // 2,
                )
            )
    session.add(
        Product(
            name="Retired kettle",
            slug="retired-kettle",
            description="No longer sold.",
            base_price=Decimal("60.00"),
            parent_id=settings.catalog_parent_id,
            menu_index=99,
            published=False,
            currency=settings.currency.upper(),
        )
    )
    session.add_all(
        [
            Page(title="About us", slug="about", description="Who makes what we sell.", body="..."),
            Page(
                title="Shipping", slug="shipping", description="Where and how we ship.", body="..."
            ),
            Post(
                title="Spring collection",
                slug="spring-collection",
                description="New mugs and throws for spring.",
                body="...",
            ),
            Post(
                title="Caring for linen",
                slug="caring-for-linen",
                description="Wash cold, dry flat.",
                body="...",
            ),
        ]
    )
    news, guides = Tag(name="news"), Tag(name="guides")
    session.add_all([news, guides])
    await session.flush()
    author = users[1]
    first = Article(
        title="We are open",
        slug="we-are-open",
        body="Our shop is open.",
        status=ArticleStatus.PUBLISHED,
        author_id=author.id,
    )
    first.tags = [news]
    second = Article(
        title="How to season an oak board",
        slug="season-an-oak-board",
        body="Oil it monthly.",
        status=ArticleStatus.DRAFT,
        author_id=author.id,
    )
    second.tags = [guides]
    session.add_all([first, second])
    await session.flush()
    session.add(
        Comment(
            article_id=first.id,
            author_name="Uma User",
            user_id=users[2].id,
            body="Congratulations!",
        )
    )
