"""The project's entry point: left alone by every scenario."""


def main() -> None:
    print("app")


if __name__ == "__main__":
    main()
